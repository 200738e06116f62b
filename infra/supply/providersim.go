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

	"rental/infra/tron"
	"rental/schemas/network"
	"rental/schemas/pricing"
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

	chain  *ProviderChain                 // nil: orders answer 503
	orders map[string]ProviderOrderResult // by ref: the same ref answers the same delegation
	loans  []loan                         // delegations to take back when their rental ends
}

// ProviderChain lets the simulated provider deliver its orders on a chain: it delegates
// from Key's stake (with a lock covering the tier, at most LockCap blocks) and takes the
// delegation back when the rental ends.
type ProviderChain struct {
	Node    *tron.Client
	Key     tron.PrivateKey
	LockCap int64
}

// loan is a delegation the provider takes back at Until.
type loan struct {
	Until      time.Time
	Receiver   tron.Address
	Resource   tron.ResourceCode
	BalanceSun int64
}

// NewProviderServer returns a provider selling offers.
func NewProviderServer(slug string, offers []WireOffer) *ProviderServer {
	return &ProviderServer{slug: slug, offers: append([]WireOffer(nil), offers...), orders: map[string]ProviderOrderResult{}}
}

// WithChain makes the provider deliver orders on c's chain.
func (p *ProviderServer) WithChain(c ProviderChain) *ProviderServer {
	p.chain = &c
	return p
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
	mux.HandleFunc("POST /v1/orders", p.order)
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
	go p.takeBackLoop(ctx, log)
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

// order delivers one provider order (the provider order API, provider.go).
func (p *ProviderServer) order(w http.ResponseWriter, r *http.Request) {
	var req ProviderOrderRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	to, err := tron.ParseAddress(req.Receiver)
	secs := pricing.TierSeconds(req.Tier)
	if err != nil || req.Ref == "" || req.Amount <= 0 || secs == 0 || (req.Resource != pricing.Energy && req.Resource != pricing.Bandwidth) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "ref, resource, tier, amount and receiver are required"})
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if done, ok := p.orders[req.Ref]; ok {
		writeJSON(w, http.StatusOK, done)
		return
	}
	if p.fail || p.chain == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "provider unavailable"})
		return
	}
	at := -1
	for i, o := range p.offers {
		if o.Resource == req.Resource && o.Tier == req.Tier && o.Amount >= req.Amount {
			at = i
			break
		}
	}
	if at < 0 {
		writeJSON(w, http.StatusConflict, map[string]string{"error": "insufficient_inventory"})
		return
	}
	res, code := tron.Energy, req.Resource
	if code == pricing.Bandwidth {
		res = tron.Bandwidth
	}
	ctx := r.Context()
	c := p.chain
	ar, err := c.Node.GetAccountResource(ctx, c.Key.Address())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	limit, weight := ar.TotalEnergyLimit, ar.TotalEnergyWeight
	if res == tron.Bandwidth {
		limit, weight = ar.TotalNetLimit, ar.TotalNetWeight
	}
	bal, err := tron.BalanceForEnergy(req.Amount, limit, weight)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	bal += bal / 100 // drift margin
	bal = max((bal+tron.SunPerTRX-1)/tron.SunPerTRX*tron.SunPerTRX, tron.SunPerTRX)
	lock := min((secs+2)/3, c.LockCap)
	dc := &tron.DelegateResourceContract{OwnerAddress: c.Key.Address(), Resource: res, Balance: bal, ReceiverAddress: to, Lock: true, LockPeriod: lock}
	txid, err := p.sendLocked(ctx, dc, func(ctx context.Context) (*tron.Transaction, error) { return c.Node.DelegateResource(ctx, dc) })
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	p.offers[at].Amount -= req.Amount
	done := ProviderOrderResult{Ref: req.Ref, TxID: txid, From: c.Key.Address().String(), Amount: req.Amount, BalanceSun: bal}
	p.orders[req.Ref] = done
	p.loans = append(p.loans, loan{Until: time.Now().Add(time.Duration(secs) * time.Second), Receiver: to, Resource: res, BalanceSun: bal})
	writeJSON(w, http.StatusOK, done)
}

// sendLocked builds, checks, signs and broadcasts one transaction of the provider's key.
func (p *ProviderServer) sendLocked(ctx context.Context, c tron.Contract, build func(context.Context) (*tron.Transaction, error)) (string, error) {
	tx, err := build(ctx)
	if err != nil {
		return "", err
	}
	if _, err := tron.CheckBuilt(tx, tron.Intent{Contract: c}); err != nil {
		return "", err
	}
	if err := tron.SignTransaction(tx, p.chain.Key); err != nil {
		return "", err
	}
	if _, err := p.chain.Node.BroadcastTransaction(ctx, tx); err != nil {
		return "", err
	}
	return tx.TxID, nil
}

// takeBackLoop undelegates the provider's loans once their rental ended; a refusal (the
// lock still runs on the chain's clock) is tried again on the next tick.
func (p *ProviderServer) takeBackLoop(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		if p.chain == nil {
			p.mu.Unlock()
			continue
		}
		keep := p.loans[:0]
		for _, l := range p.loans {
			if time.Now().Before(l.Until) {
				keep = append(keep, l)
				continue
			}
			uc := &tron.UnDelegateResourceContract{OwnerAddress: p.chain.Key.Address(), Resource: l.Resource, Balance: l.BalanceSun, ReceiverAddress: l.Receiver}
			if _, err := p.sendLocked(ctx, uc, func(ctx context.Context) (*tron.Transaction, error) { return p.chain.Node.UnDelegateResource(ctx, uc) }); err != nil {
				if log != nil {
					log.Info("simulated provider could not take a delegation back yet", "receiver", l.Receiver.String(), "err", err)
				}
				keep = append(keep, l)
			}
		}
		p.loans = keep
		p.mu.Unlock()
	}
}
