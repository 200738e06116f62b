// Package marketfeed reads what energy providers charge now, one adapter per peer's public
// price API, behind the Feed interface the market sampler (processors/marketwatch) calls
// every 5 minutes. Adapters here:
//
//   - Offers: a provider speaking the wholesale offers API (GET {base}/v1/offers, the one
//     infra/supply buys from; the dev stack's simulated providers serve it);
//   - Prices: a peer publishing a rental-api-v1 price table (GET {base}/v1/prices);
//   - Snapshot: this service's own row, from the pricer's snapshot.
//
// A new peer with another API gets its own adapter implementing Feed.
package marketfeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"rental/infra/supply"
	"rental/schemas/events"
	"rental/schemas/market"
	"rental/schemas/pricing"
)

// Feed is one provider's public price API.
type Feed interface {
	// Slug names the provider on the board.
	Slug() string
	// Kinds are the board kinds a provider first seen through this feed gets by default
	// (operators change them with `admin market-provider`).
	Kinds() []market.Kind
	// Quote reads the provider's current prices. An error means "no sample this time":
	// the provider's row ages and turns stale after 15 minutes.
	Quote(ctx context.Context) (market.Quote, error)
}

// ---- the wholesale offers API ----

// Offers adapts a supply.Provider (the offers API) to a Feed: the 1 h and 1 d prices are the
// cheapest energy offers of those tiers, available_energy the sum of the 1 h energy offers;
// the API does not say a total.
type Offers struct {
	P supply.Provider
}

func (o Offers) Slug() string         { return o.P.Slug() }
func (o Offers) Kinds() []market.Kind { return []market.Kind{market.KindAPI} }

func (o Offers) Quote(ctx context.Context) (market.Quote, error) {
	offers, err := o.P.ListOffers(ctx)
	if err != nil {
		return market.Quote{}, err
	}
	var q market.Quote
	var avail int64
	seen1h := false
	for _, of := range offers {
		if of.Resource != pricing.Energy {
			continue
		}
		switch of.Tier {
		case pricing.Tier1h:
			seen1h = true
			avail += of.Amount
			q.PriceSun1h = minPrice(q.PriceSun1h, of.Cost)
		case pricing.Tier1d:
			q.PriceSun1d = minPrice(q.PriceSun1d, of.Cost)
		}
	}
	if seen1h {
		q.AvailableEnergy = &avail
	}
	return q, nil
}

func minPrice(cur *events.Centisun, p pricing.Centisun) *events.Centisun {
	v := events.Centisun(p)
	if cur == nil || v < *cur {
		return &v
	}
	return cur
}

// NewOffers is the Offers feed of the offers API at baseURL.
func NewOffers(slug, baseURL string) Offers {
	return Offers{P: supply.NewHTTPProvider(slug, baseURL, &http.Client{Timeout: 5 * time.Second})}
}

// ---- a rental-api-v1 price table ----

// Prices reads a peer's GET {base}/v1/prices (the PriceTable of rental-api-v1): the energy
// 1 h and 1 d rows' price_sun_per_unit when the row is available, and available_energy.
type Prices struct {
	slug string
	base string
	http *http.Client
}

// NewPrices is the Prices feed of the peer at baseURL.
func NewPrices(slug, baseURL string) *Prices {
	return &Prices{slug: slug, base: strings.TrimRight(baseURL, "/"), http: &http.Client{Timeout: 5 * time.Second}}
}

func (p *Prices) Slug() string         { return p.slug }
func (p *Prices) Kinds() []market.Kind { return []market.Kind{market.KindAPI, market.KindWeb} }

func (p *Prices) Quote(ctx context.Context) (market.Quote, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/v1/prices?resource=energy", nil)
	if err != nil {
		return market.Quote{}, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return market.Quote{}, fmt.Errorf("marketfeed: %s: %w", p.slug, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return market.Quote{}, fmt.Errorf("marketfeed: %s: %w", p.slug, err)
	}
	if resp.StatusCode != http.StatusOK {
		return market.Quote{}, fmt.Errorf("marketfeed: %s: HTTP %d", p.slug, resp.StatusCode)
	}
	var t events.PriceTable
	if err := json.Unmarshal(body, &t); err != nil {
		return market.Quote{}, fmt.Errorf("marketfeed: %s: %w", p.slug, err)
	}
	var q market.Quote
	for _, it := range t.Items {
		if it.Resource != events.Resource(pricing.Energy) || !it.Available || it.PriceSunPerUnit <= 0 {
			continue
		}
		c := events.Centisun(it.PriceSunPerUnit * 100)
		switch it.Tier {
		case events.Tier(pricing.Tier1h):
			q.PriceSun1h = &c
		case events.Tier(pricing.Tier1d):
			q.PriceSun1d = &c
		}
	}
	avail := t.AvailableEnergy
	q.AvailableEnergy = &avail
	return q, nil
}

// ---- this service ----

// Snapshot is this service's own row, read from the pricer's latest snapshot: the exact
// unit price of the row's minimum amount for energy 1 h and 1 d (null while not on sale)
// and the 1 h book's depth.
type Snapshot struct {
	SlugName string
	Src      pricing.SnapshotSource
}

func (s Snapshot) Slug() string         { return s.SlugName }
func (s Snapshot) Kinds() []market.Kind { return []market.Kind{market.KindAPI, market.KindWeb} }

// ErrNoSnapshot is a Snapshot feed without a fresh snapshot (the pricer is not running).
var ErrNoSnapshot = errors.New("marketfeed: no fresh price snapshot")

func (s Snapshot) Quote(context.Context) (market.Quote, error) {
	snap, ok := s.Src.Current()
	if !ok {
		return market.Quote{}, ErrNoSnapshot
	}
	price := func(t pricing.Tier) *events.Centisun {
		r, ok := snap.Rules[pricing.BookKey{Resource: pricing.Energy, Tier: t}]
		if !ok {
			return nil
		}
		pq, err := snap.Price(pricing.Energy, t, r.MinAmount)
		if err != nil {
			return nil
		}
		c := events.Centisun(pq.UnitPriceSun)
		return &c
	}
	q := market.Quote{PriceSun1h: price(pricing.Tier1h), PriceSun1d: price(pricing.Tier1d)}
	avail := snap.Table.AvailableEnergy
	q.AvailableEnergy = &avail
	return q, nil
}
