package supply

import (
	"context"
	"strings"
	"sync"
	"time"

	"rental/schemas/pricing"
)

// Collector gathers one cycle's supply from every source at once. A source that fails keeps
// contributing its last good answer for MaxStale (a provider hiccup or a slow node does not
// empty the book for a cycle); after that it contributes nothing, so a dead source never
// advertises stock for long. Each failure is reported so the pricer can log and count it.
type Collector struct {
	Pool      *Pool        // own stake pools; nil for none
	Providers []Provider   // market providers
	Deep      *DeepReserve // deep reserve; nil for none
	// DeepTiers are the tiers the deep reserve is priced for (the tiers on sale).
	DeepTiers []pricing.Tier
	MaxStale  time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	mu   sync.Mutex
	last map[string]sourceResult
}

type sourceResult struct {
	at      time.Time
	instant map[pricing.Resource]int64
	offers  []pricing.Offer
	pools   PoolFigures // the pool source's reading
}

// Detail is what a cycle read fresh, source by source: only sources that answered in this
// cycle appear (a last good answer reused for MaxStale does not), so a figure here was read
// after Collect began. Supply committed at acceptance is computed from it.
type Detail struct {
	Pools     PoolFigures                // nil: the pools did not answer (or none configured)
	Providers map[string][]pricing.Offer // by provider slug
	Deep      []pricing.Offer            // the deep reserve's offers (nil: not answered)
	DeepFresh bool                       // the deep reserve answered
}

// SourceError is one source's failure in a cycle. Stale says its last good answer was used.
type SourceError struct {
	Source string
	Err    error
	Stale  bool
}

// Collect asks every source concurrently and merges the answers.
func (c *Collector) Collect(ctx context.Context) (pricing.Supply, []SourceError) {
	sup, _, failures := c.CollectDetail(ctx)
	return sup, failures
}

// CollectDetail is Collect with what each source answered fresh in this cycle.
func (c *Collector) CollectDetail(ctx context.Context) (pricing.Supply, Detail, []SourceError) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	type job struct {
		name string
		fn   func(context.Context) (sourceResult, error)
	}
	var jobs []job
	if c.Pool != nil {
		jobs = append(jobs, job{"pool", func(ctx context.Context) (sourceResult, error) {
			f, err := c.Pool.Figures(ctx)
			if err != nil {
				return sourceResult{}, err
			}
			return sourceResult{instant: f.Units(), pools: f}, nil
		}})
	}
	for _, p := range c.Providers {
		jobs = append(jobs, job{"provider:" + p.Slug(), func(ctx context.Context) (sourceResult, error) {
			o, err := p.ListOffers(ctx)
			return sourceResult{offers: o}, err
		}})
	}
	if c.Deep != nil {
		jobs = append(jobs, job{"deep", func(ctx context.Context) (sourceResult, error) {
			o, err := c.Deep.Offers(ctx, c.DeepTiers)
			return sourceResult{offers: o}, err
		}})
	}

	results := make([]sourceResult, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { results[i], errs[i] = j.fn(ctx) })
	}
	wg.Wait()

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]sourceResult{}
	}
	t := now()
	sup := pricing.Supply{Instant: map[pricing.Resource]int64{}}
	var failures []SourceError
	d := Detail{Providers: map[string][]pricing.Offer{}}
	for i, j := range jobs {
		r := results[i]
		if errs[i] == nil {
			r.at = t
			c.last[j.name] = r
			switch {
			case j.name == "pool":
				d.Pools = r.pools
			case j.name == "deep":
				d.Deep, d.DeepFresh = r.offers, true
			default:
				d.Providers[strings.TrimPrefix(j.name, "provider:")] = r.offers
			}
		} else {
			prev, ok := c.last[j.name]
			stale := ok && t.Sub(prev.at) <= c.MaxStale
			failures = append(failures, SourceError{Source: j.name, Err: errs[i], Stale: stale})
			if !stale {
				continue
			}
			r = prev
		}
		for res, n := range r.instant {
			sup.Instant[res] += n
		}
		sup.Offers = append(sup.Offers, r.offers...)
	}
	return sup, d, failures
}
