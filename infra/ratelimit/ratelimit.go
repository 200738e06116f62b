// Package ratelimit holds the request budgets of the API, shared by every edge replica
// through Redis:
//
//   - Window: at most N requests in any rolling window (a sliding-window log). This is the
//     per-credential budget of the spec ("30 requests per second per key"): the 31st request
//     inside any one second is refused, however the 30 before it were spread.
//   - GCRA: a generic cell-rate budget (github.com/go-redis/redis_rate) for the per-IP
//     budget, where smoothing matters more than exactness.
//   - Quota: daily and monthly counters on calendar windows (UTC).
//   - Concurrency: leases on in-flight work per account (orders and batches in flight).
//
// Redis holds only what may be lost: a flushed Redis resets budgets, nothing else. Every
// method returns a plain error when Redis fails; the caller decides to fail open or closed
// (the edge fails open for budgets, see docs/auth.md).
package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Decision is the outcome of charging one request to a budget.
type Decision struct {
	Allowed   bool
	Limit     int           // the budget: requests per window, or the GCRA burst
	Remaining int           // requests left right now after this one
	Reset     time.Duration // until the budget is whole again
	// RetryAfter is, for a refused request, how long until one request would pass.
	RetryAfter time.Duration
}

// Limiter charges budgets kept in Redis under its key prefix.
type Limiter struct {
	rdb    redis.Scripter
	prefix string
	gcra   *redis_rate.Limiter
}

// New returns a limiter on rdb. keyPrefix starts every key it writes, so deployments and
// tests sharing one Redis do not share budgets.
func New(rdb *redis.Client, keyPrefix string) *Limiter {
	return &Limiter{rdb: rdb, prefix: keyPrefix, gcra: redis_rate.NewLimiter(rdb)}
}

// windowScript is a sliding-window log: a sorted set of request times (Redis clock, µs).
// Refused requests are not recorded, so a client hammering a full budget recovers as soon
// as old requests leave the window. With a second key it first sets that key (SET NX, for
// ARGV[4] ms) and, when it was already set, stops there: {-1, 0, 0, 0}, nothing charged.
var windowScript = redis.NewScript(`
if KEYS[2] and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[4]) then
  return {-1, 0, 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
local allowed = 0
if n < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  n = n + 1
  allowed = 1
end
redis.call('PEXPIRE', KEYS[1], math.floor(window / 1000) + 1000)
local retry = 0
local reset = 0
if n > 0 then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  retry = tonumber(oldest[2]) + window - now
  reset = tonumber(newest[2]) + window - now
end
return {allowed, limit - n, retry, reset}
`)

// Window charges one request to the budget "limit requests in any rolling window" named
// key.
func (l *Limiter) Window(ctx context.Context, key string, limit int, window time.Duration) (Decision, error) {
	d, _, err := l.window(ctx, key, limit, window, "", 0)
	return d, err
}

// WindowOnce is Window for a request that may be made only once: in the same round trip
// it first sets the Redis key once (SET NX, living onceTTL; the key is the caller's, not
// under the limiter's prefix). first is false when once was already set: then nothing was
// charged and the Decision is empty. (On a Redis Cluster both keys must share a slot.)
func (l *Limiter) WindowOnce(ctx context.Context, key string, limit int, window time.Duration, once string, onceTTL time.Duration) (d Decision, first bool, err error) {
	if once == "" || onceTTL <= 0 {
		return Decision{}, false, fmt.Errorf("ratelimit: window budget %q: the once key and its life are required", key)
	}
	return l.window(ctx, key, limit, window, once, onceTTL)
}

func (l *Limiter) window(ctx context.Context, key string, limit int, window time.Duration, once string, onceTTL time.Duration) (Decision, bool, error) {
	if limit <= 0 || window <= 0 {
		return Decision{}, false, fmt.Errorf("ratelimit: window budget %q: limit and window must be positive", key)
	}
	var member [8]byte
	_, _ = rand.Read(member[:])
	keys := []string{l.prefix + "win:" + key}
	if once != "" {
		keys = append(keys, once)
	}
	res, err := windowScript.Run(ctx, l.rdb, keys,
		window.Microseconds(), limit, hex.EncodeToString(member[:]), max(onceTTL.Milliseconds(), 1)).Int64Slice()
	if err != nil {
		return Decision{}, false, fmt.Errorf("ratelimit: window %q: %w", key, err)
	}
	if res[0] == -1 {
		return Decision{}, false, nil
	}
	d := Decision{
		Allowed:   res[0] == 1,
		Limit:     limit,
		Remaining: int(max(res[1], 0)),
		Reset:     time.Duration(max(res[3], 0)) * time.Microsecond,
	}
	if !d.Allowed {
		d.RetryAfter = time.Duration(max(res[2], 1)) * time.Microsecond
	}
	return d, true, nil
}

// GCRA charges one request to the cell-rate budget lim named key.
func (l *Limiter) GCRA(ctx context.Context, key string, lim redis_rate.Limit) (Decision, error) {
	res, err := l.gcra.Allow(ctx, l.prefix+"gcra:"+key, lim)
	if err != nil {
		return Decision{}, fmt.Errorf("ratelimit: gcra %q: %w", key, err)
	}
	d := Decision{Allowed: res.Allowed > 0, Limit: lim.Burst, Remaining: res.Remaining, Reset: max(res.ResetAfter, 0)}
	if !d.Allowed {
		d.RetryAfter = max(res.RetryAfter, time.Millisecond)
	}
	return d, nil
}

// Seconds rounds a duration up to whole seconds, the unit of RateLimit-Reset and
// Retry-After; a positive duration is at least 1.
func Seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}
