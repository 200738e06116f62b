package edge

// Market endpoints (rental-api-v1 "Pricing and chain"; docs/market.md):
//
//	GET /v1/market           public or key: MarketBoard
//	GET /v1/market/history   public or key: {slug, hours, points[]}
//
// The board is built per request (so `stale` and `as_of` are exact) from provider
// metadata and the latest samples that processors/marketwatch stores every 5 minutes;
// those two reads are held in memory for a few seconds, the energy price parameter for a
// minute (infra/chainread).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"rental/schemas/apierr"
	"rental/schemas/market"
)

// MarketReader reads what the market sampler stores; *marketstore.Store is one.
type MarketReader interface {
	Providers(ctx context.Context) ([]market.Provider, error)
	Latest(ctx context.Context) (map[string]market.Sample, error)
	History(ctx context.Context, slug string, since time.Time) ([]market.Sample, error)
}

// EnergyFeeReader reads the chain's energy price (getEnergyFee, SUN per energy unit);
// *chainread.Reader is one.
type EnergyFeeReader interface {
	EnergyFee(ctx context.Context) (int64, error)
}

// MarketOptions are the market module's dependencies.
type MarketOptions struct {
	Store MarketReader    // required
	Fees  EnergyFeeReader // required: burn_sun
	// CacheTTL is how long provider metadata and latest samples are reused (default 5 s;
	// samples arrive every 5 minutes).
	CacheTTL time.Duration
	Now      func() time.Time // default time.Now
}

// Market serves the market board and history.
type Market struct {
	o MarketOptions

	mu     sync.Mutex
	at     time.Time
	provs  []market.Provider
	latest map[string]market.Sample
}

// NewMarket checks the options.
func NewMarket(o MarketOptions) (*Market, error) {
	if o.Store == nil || o.Fees == nil {
		return nil, errors.New("edge: market: Store and Fees are required")
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Market{o: o}, nil
}

// Handlers implements Module.
func (m *Market) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{
		"GET /v1/market":         m.getBoard,
		"GET /v1/market/history": m.getHistory,
	}
}

func (m *Market) inputs(ctx context.Context, now time.Time) ([]market.Provider, map[string]market.Sample, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.latest != nil && now.Sub(m.at) < m.o.CacheTTL && !now.Before(m.at) {
		return m.provs, m.latest, nil
	}
	provs, err := m.o.Store.Providers(ctx)
	if err != nil {
		return nil, nil, err
	}
	latest, err := m.o.Store.Latest(ctx)
	if err != nil {
		return nil, nil, err
	}
	m.provs, m.latest, m.at = provs, latest, now
	return provs, latest, nil
}

func (m *Market) getBoard(ctx context.Context, rc *fasthttp.RequestCtx) error {
	now := m.o.Now().UTC().Truncate(time.Millisecond)
	provs, latest, err := m.inputs(ctx, now)
	if err != nil {
		return err
	}
	burn, err := m.o.Fees.EnergyFee(ctx)
	if err != nil {
		return apierr.ChainUnavailable.New("the chain's energy price could not be read; retry shortly").With("reason", "energy_fee_unavailable")
	}
	return WriteJSON(rc, fasthttp.StatusOK, market.BuildBoard(now, burn, provs, latest))
}

func (m *Market) getHistory(ctx context.Context, rc *fasthttp.RequestCtx) error {
	q, err := queryParams(rc, "slug", "hours")
	if err != nil {
		return err
	}
	slug, ok := q["slug"]
	if !ok || slug == "" {
		return Invalid("slug", "required", "slug is required")
	}
	hours := market.DefaultHistoryHours
	if v, ok := q["hours"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || market.CheckHours(n) != nil {
			return Invalid("hours", "range", fmt.Sprintf("hours must be an integer from 1 to %d", market.MaxHistoryHours)).
				With("min", 1).With("max", market.MaxHistoryHours)
		}
		hours = n
	}
	var samples []market.Sample
	// A slug that cannot exist has no samples: the spec's empty array, without a query.
	if market.ValidSlug(slug) == nil {
		since := m.o.Now().Add(-time.Duration(hours) * time.Hour)
		if samples, err = m.o.Store.History(ctx, slug, since); err != nil {
			return err
		}
	}
	return WriteJSON(rc, fasthttp.StatusOK, market.HistoryOf(slug, hours, samples))
}
