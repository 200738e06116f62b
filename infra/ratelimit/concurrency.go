package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"rental/schemas/apierr"
)

// Concurrency bounds work in flight per subject (orders and batches per account, 1101).
// Each Acquire takes a lease that Release gives back; a lease not released (a crashed
// replica) lapses after Lease, so a crash never blocks an account for longer.
type Concurrency struct {
	rdb    *redis.Client
	prefix string
	max    int
	lease  time.Duration
}

// ConcurrencyOptions configure a Concurrency.
type ConcurrencyOptions struct {
	KeyPrefix string        // starts every key
	Max       int           // leases in flight per subject (default 10)
	Lease     time.Duration // longest a lease is held without Release (default 60 s)
}

// NewConcurrency returns a limiter on rdb.
func NewConcurrency(rdb *redis.Client, o ConcurrencyOptions) *Concurrency {
	if o.Max <= 0 {
		o.Max = 10
	}
	if o.Lease <= 0 {
		o.Lease = time.Minute
	}
	return &Concurrency{rdb: rdb, prefix: o.KeyPrefix, max: o.Max, lease: o.Lease}
}

// ErrNoLease is returned by Release for a lease that already lapsed or was released.
var ErrNoLease = errors.New("ratelimit: lease not held")

var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(first[2]) - now}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + 1000)
return {1, 0}
`)

// Acquire takes a lease for subject and returns its token for Release. With Max leases in
// flight it returns 1101 concurrency_limited (Retry-After: until the oldest lease lapses,
// at most; usually a release comes much sooner, so Retry-After is 1). A Redis failure is
// returned as a plain error: the caller chooses to fail open (recommended: the ledger, not
// this limiter, protects money) or closed.
func (c *Concurrency) Acquire(ctx context.Context, subject string) (string, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	res, err := acquireScript.Run(ctx, c.rdb, []string{c.key(subject)}, c.max, c.lease.Milliseconds(), token).Int64Slice()
	if err != nil {
		return "", fmt.Errorf("ratelimit: concurrency %q: %w", subject, err)
	}
	if res[0] == 0 {
		return "", apierr.ConcurrencyLimited.Newf("%d orders or batches already in flight for the account", c.max).
			With("limit", c.max).WithRetryAfter(1)
	}
	return token, nil
}

// Release gives a lease back. Call it once the work is decided (committed or failed),
// with a context that is not the request's if that may already be cancelled.
func (c *Concurrency) Release(ctx context.Context, subject, token string) error {
	n, err := c.rdb.ZRem(ctx, c.key(subject), token).Result()
	if err != nil {
		return fmt.Errorf("ratelimit: release %q: %w", subject, err)
	}
	if n == 0 {
		return ErrNoLease
	}
	return nil
}

// InFlight counts the live leases of subject.
func (c *Concurrency) InFlight(ctx context.Context, subject string) (int, error) {
	ms := time.Now().UnixMilli() // the local clock; leases are timed by Redis's, close enough for a gauge
	n, err := c.rdb.ZCount(ctx, c.key(subject), fmt.Sprint(ms), "+inf").Result()
	return int(n), err
}

func (c *Concurrency) key(subject string) string { return c.prefix + "inflight:" + subject }
