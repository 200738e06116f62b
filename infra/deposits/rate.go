package deposits

import (
	"context"
	"sync"
	"time"
)

// Rate is a USDT to TRX rate before the spread: SUN per 1 USDT.
type Rate struct {
	SunPerUSDT int64
	Source     string // fixed_env, or <swap>_v3@<block> for a swap-pool source
	At         time.Time
}

// RateSource reads the current rate; ok is false when no rate is available (deposits are
// then still accepted, and held until one is).
type RateSource interface {
	Rate(ctx context.Context) (r Rate, ok bool, err error)
}

// SourceFixedEnv names the configured fixed rate (USDT_RATE_SUN).
const SourceFixedEnv = "fixed_env"

// FixedRate is the configured rate; zero means "no rate".
type FixedRate struct {
	SunPerUSDT int64
	Now        func() time.Time // default time.Now
}

// Rate implements RateSource.
func (f FixedRate) Rate(context.Context) (Rate, bool, error) {
	if f.SunPerUSDT <= 0 {
		return Rate{}, false, nil
	}
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	return Rate{SunPerUSDT: f.SunPerUSDT, Source: SourceFixedEnv, At: now().UTC()}, true, nil
}

// RateTTL is how long a read rate is reused (the spec's 60 s cache of rate_now).
const RateTTL = 60 * time.Second

// CachedRate reuses what Source answered for TTL (default RateTTL). `at` of the rate is
// when it was read, so a cached answer shows its age.
type CachedRate struct {
	Source RateSource
	TTL    time.Duration
	Now    func() time.Time

	mu      sync.Mutex
	r       Rate
	ok      bool
	fetched time.Time
}

// Rate implements RateSource.
func (c *CachedRate) Rate(ctx context.Context) (Rate, bool, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	ttl := c.TTL
	if ttl <= 0 {
		ttl = RateTTL
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.fetched.IsZero() && now().Sub(c.fetched) < ttl {
		return c.r, c.ok, nil
	}
	r, ok, err := c.Source.Rate(ctx)
	if err != nil {
		return Rate{}, false, err
	}
	c.r, c.ok, c.fetched = r, ok, now()
	return r, ok, nil
}
