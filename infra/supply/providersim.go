package supply

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"rental/processors/pricing"
	"rental/schemas/network"
)

// ProviderServer is a simulated external provider: a tiny HTTP API with configurable offers,
// for the dev stack (127.0.0.1:8091) and tests.
//
//	GET  /v1/offers  -> OffersResponse
//	PUT  /v1/offers  <- [WireOffer...]  replaces the offers (control, dev only)
//	POST /sim/fail   <- {"fail": true}  makes GET /v1/offers answer 503 until reset
type ProviderServer struct {
	slug string

	mu     sync.RWMutex
	offers []WireOffer
	fail   bool
}

// NewProviderServer returns a provider selling offers.
func NewProviderServer(slug string, offers []WireOffer) *ProviderServer {
	return &ProviderServer{slug: slug, offers: append([]WireOffer(nil), offers...)}
}

// DefaultOffers is the simulated provider's inventory. On mainnet it sells deep stock at
// several prices; on nile it is the spec's one provider with a small fixed inventory, so a
// large order there fails with 5001 where mainnet fills it.
func DefaultOffers(n network.Network) []WireOffer {
	if n == network.Nile {
		return []WireOffer{
			{Resource: pricing.Energy, Tier: pricing.Tier5m, PriceSun: 6200, Amount: 300_000},
			{Resource: pricing.Energy, Tier: pricing.Tier1h, PriceSun: 7800, Amount: 300_000},
			{Resource: pricing.Bandwidth, Tier: pricing.Tier1h, PriceSun: 42_000, Amount: 20_000},
		}
	}
	return []WireOffer{
		{Resource: pricing.Energy, Tier: pricing.Tier5m, PriceSun: 6200, Amount: 3_000_000},
		{Resource: pricing.Energy, Tier: pricing.Tier1h, PriceSun: 7800, Amount: 2_000_000},
		{Resource: pricing.Energy, Tier: pricing.Tier1h, PriceSun: 8200, Amount: 5_000_000},
		{Resource: pricing.Bandwidth, Tier: pricing.Tier5m, PriceSun: 32_000, Amount: 200_000},
		{Resource: pricing.Bandwidth, Tier: pricing.Tier1h, PriceSun: 42_000, Amount: 500_000},
	}
}

// SetOffers replaces the offers.
func (p *ProviderServer) SetOffers(offers []WireOffer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offers = append([]WireOffer(nil), offers...)
}

// SetFailing makes the offers endpoint answer 503 (true) or work again (false).
func (p *ProviderServer) SetFailing(fail bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = fail
}

// Handler serves the API.
func (p *ProviderServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/offers", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.RLock()
		resp, fail := OffersResponse{Provider: p.slug, Offers: append([]WireOffer{}, p.offers...)}, p.fail
		p.mu.RUnlock()
		if fail {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "provider unavailable"})
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("PUT /v1/offers", func(w http.ResponseWriter, r *http.Request) {
		var offers []WireOffer
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&offers); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		for _, o := range offers {
			if err := o.check(); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
		}
		p.SetOffers(offers)
		writeJSON(w, http.StatusOK, offers)
	})
	mux.HandleFunc("POST /sim/fail", func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Fail bool `json:"fail"`
		}
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		p.SetFailing(b.Fail)
		writeJSON(w, http.StatusOK, b)
	})
	return mux
}

// Serve listens on addr until ctx ends.
func (p *ProviderServer) Serve(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if log != nil {
		log.Info("simulated provider " + p.slug + " listening on " + ln.Addr().String())
	}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
