package supply

import (
	"context"
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
}

// SourceError is one source's failure in a cycle. Stale says its last good answer was used.
type SourceError struct {
	Source string
	Err    error
	Stale  bool
}

// Collect asks every source concurrently and merges the answers.
func (c *Collector) Collect(ctx context.Context) (pricing.Supply, []SourceError) {
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
			inv, err := c.Pool.Inventory(ctx)
			return sourceResult{instant: inv}, err
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
	for i, j := range jobs {
		r := results[i]
		if errs[i] == nil {
			r.at = t
			c.last[j.name] = r
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
	return sup, failures
}
