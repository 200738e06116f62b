package signup

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Default challenge budgets. Signing in takes one challenge; these leave room for retries
// and several wallets behind one NAT while keeping a scripted flood of challenges (rows in
// Postgres) cheap to refuse.
var (
	DefaultPerIP      = redis_rate.Limit{Rate: 30, Burst: 10, Period: time.Minute}
	DefaultPerAddress = redis_rate.Limit{Rate: 5, Burst: 5, Period: time.Minute}
	// DefaultAddressCeiling is the budget of one address from all sources together: twelve
	// sources each at its full per-address budget.
	DefaultAddressCeiling = redis_rate.Limit{Rate: 60, Burst: 30, Period: time.Minute}
)

// ChallengeLimiter is the challenge endpoint's own budget, on top of the edge's general
// per-IP budget, in three buckets: per source (an IPv4 address or an IPv6 network, the
// edge's ClientSource), per source and address, and per address from all sources (a
// ceiling). It is a GCRA limiter in Redis (redis_rate), so every edge replica shares it.
// Losing Redis loses only the buckets.
type ChallengeLimiter struct {
	lim            *redis_rate.Limiter
	prefix         string
	perIP          redis_rate.Limit
	perAddress     redis_rate.Limit
	addressCeiling redis_rate.Limit
}

// LimiterOptions configure a ChallengeLimiter.
type LimiterOptions struct {
	// KeyPrefix starts every bucket key (redis_rate itself prepends "rate:"), so
	// deployments and tests sharing one Redis do not share buckets.
	KeyPrefix string
	PerIP     redis_rate.Limit // per source; default DefaultPerIP
	// PerAddress is the budget of one address from one source (default
	// DefaultPerAddress): what one source spends on an address is its own, so asking for
	// a victim's challenges does not lock the victim out.
	PerAddress redis_rate.Limit
	// AddressCeiling bounds one address from all sources together (default
	// DefaultAddressCeiling); keep it well above PerAddress.
	AddressCeiling redis_rate.Limit
}

// NewChallengeLimiter returns a limiter on rdb.
func NewChallengeLimiter(rdb *redis.Client, o LimiterOptions) *ChallengeLimiter {
	if o.PerIP.IsZero() {
		o.PerIP = DefaultPerIP
	}
	if o.PerAddress.IsZero() {
		o.PerAddress = DefaultPerAddress
	}
	if o.AddressCeiling.IsZero() {
		o.AddressCeiling = DefaultAddressCeiling
	}
	return &ChallengeLimiter{lim: redis_rate.NewLimiter(rdb), prefix: o.KeyPrefix, perIP: o.PerIP, perAddress: o.PerAddress,
		addressCeiling: o.AddressCeiling}
}

// Allow takes one unit from the source's bucket, the source's bucket for the address and
// the address's ceiling, in that order, stopping at the first that refuses: a source over
// its own budgets drains nothing shared. It returns 0 when the call may proceed, else the
// whole seconds (at least 1) after which a retry can succeed. source is the caller's
// ClientSource; one source can take at most PerAddress of an address's AddressCeiling, so
// it cannot lock the address out for the others.
func (l *ChallengeLimiter) Allow(ctx context.Context, source, address string) (retryAfter int, err error) {
	for _, b := range []struct {
		key   string
		limit redis_rate.Limit
	}{
		{"challenge:ip:" + source, l.perIP},
		{"challenge:src-addr:" + source + ":" + address, l.perAddress},
		{"challenge:addr:" + address, l.addressCeiling},
	} {
		r, err := l.lim.Allow(ctx, l.prefix+b.key, b.limit)
		if err != nil {
			return 0, fmt.Errorf("signup: rate limit: %w", err)
		}
		if r.Allowed == 0 {
			return seconds(r.RetryAfter), nil
		}
	}
	return 0, nil
}

func seconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}
