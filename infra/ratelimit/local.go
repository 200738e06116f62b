package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Local is a per-replica, in-memory budget: the fallback of the Redis budgets while Redis
// is down (docs/auth.md "Redis down"). With N replicas a client may get up to N times its
// budget during an outage; that is the price of not refusing all traffic, and the per-IP
// budget still stops a flood at each replica. Buckets unused for idleAfter are dropped.
type Local struct {
	mu      sync.Mutex
	buckets map[string]*localBucket
	swept   time.Time
}

type localBucket struct {
	lim  *rate.Limiter
	used time.Time
}

const localIdleAfter = time.Minute

// NewLocal returns an empty in-memory limiter.
func NewLocal() *Local { return &Local{buckets: map[string]*localBucket{}, swept: time.Now()} }

// Allow charges one request to key's token bucket of perSecond with burst and returns the
// decision in the form of the Redis budgets'.
func (l *Local) Allow(key string, perSecond float64, burst int) Decision {
	now := time.Now()
	l.mu.Lock()
	if now.Sub(l.swept) > localIdleAfter {
		for k, b := range l.buckets {
			if now.Sub(b.used) > localIdleAfter {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b, ok := l.buckets[key]
	if !ok || b.lim.Limit() != rate.Limit(perSecond) || b.lim.Burst() != burst {
		b = &localBucket{lim: rate.NewLimiter(rate.Limit(perSecond), burst)}
		l.buckets[key] = b
	}
	b.used = now
	lim := b.lim
	l.mu.Unlock()

	d := Decision{Limit: burst, Reset: time.Second}
	if lim.AllowN(now, 1) {
		d.Allowed = true
		d.Remaining = max(int(lim.TokensAt(now)), 0)
		return d
	}
	// Time until one token is back.
	wait := time.Duration((1 - lim.TokensAt(now)) / perSecond * float64(time.Second))
	d.RetryAfter, d.Reset = max(wait, time.Millisecond), max(wait, time.Millisecond)
	return d
}
