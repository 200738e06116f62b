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
)

// ChallengeLimiter is the challenge endpoint's own budget, per source IP and per address,
// on top of the edge's general per-IP budget. It is a GCRA limiter in Redis (redis_rate), so
// every edge replica shares it. Losing Redis loses only the buckets.
type ChallengeLimiter struct {
	lim        *redis_rate.Limiter
	prefix     string
	perIP      redis_rate.Limit
	perAddress redis_rate.Limit
}

// LimiterOptions configure a ChallengeLimiter.
type LimiterOptions struct {
	// KeyPrefix starts every bucket key (redis_rate itself prepends "rate:"), so
	// deployments and tests sharing one Redis do not share buckets.
	KeyPrefix  string
	PerIP      redis_rate.Limit // default DefaultPerIP
	PerAddress redis_rate.Limit // default DefaultPerAddress
}

// NewChallengeLimiter returns a limiter on rdb.
func NewChallengeLimiter(rdb *redis.Client, o LimiterOptions) *ChallengeLimiter {
	if o.PerIP.IsZero() {
		o.PerIP = DefaultPerIP
	}
	if o.PerAddress.IsZero() {
		o.PerAddress = DefaultPerAddress
	}
	return &ChallengeLimiter{lim: redis_rate.NewLimiter(rdb), prefix: o.KeyPrefix, perIP: o.PerIP, perAddress: o.PerAddress}
}

// Allow takes one unit from both the IP's and the address's bucket. It returns 0 when the
// call may proceed, else the whole seconds (at least 1) after which a retry can succeed.
// The IP bucket is checked first and an IP over budget does not drain the address bucket,
// so a flood from one source cannot lock a victim's address out.
func (l *ChallengeLimiter) Allow(ctx context.Context, ip, address string) (retryAfter int, err error) {
	r, err := l.lim.Allow(ctx, l.prefix+"challenge:ip:"+ip, l.perIP)
	if err != nil {
		return 0, fmt.Errorf("signup: rate limit: %w", err)
	}
	if r.Allowed == 0 {
		return seconds(r.RetryAfter), nil
	}
	r, err = l.lim.Allow(ctx, l.prefix+"challenge:addr:"+address, l.perAddress)
	if err != nil {
		return 0, fmt.Errorf("signup: rate limit: %w", err)
	}
	if r.Allowed == 0 {
		return seconds(r.RetryAfter), nil
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
