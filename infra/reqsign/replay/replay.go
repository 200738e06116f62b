// Package replay is the single-use signature cache of signed requests (1009): a signature
// is remembered in Redis with SET NX for as long as its timestamp could still pass the
// skew check, so every edge replica refuses a second use.
package replay

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"rental/infra/reqsign"
)

// DefaultTTL covers the whole acceptance window of one signature: its timestamp may be up
// to MaxSkew ahead of the server clock when first seen and stays acceptable until MaxSkew
// after it, so 2×MaxSkew, plus a margin for clock differences between replicas (a replica
// whose clock lags accepts the signature for that much longer).
const DefaultTTL = 2*reqsign.MaxSkew + 5*time.Second

// Cache remembers used signatures.
type Cache struct {
	rdb    *redis.Client
	prefix string
	ttl    time.Duration
}

// New returns a cache on rdb; keyPrefix starts every key (deployments and tests sharing a
// Redis stay apart); ttl 0 means DefaultTTL.
func New(rdb *redis.Client, keyPrefix string, ttl time.Duration) *Cache {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Cache{rdb: rdb, prefix: keyPrefix, ttl: ttl}
}

// Remember records the use of signature sum by keyID and reports whether it is the first.
// A Redis failure is an error; the caller decides whether to fail open or closed.
func (c *Cache) Remember(ctx context.Context, keyID string, sum []byte) (bool, error) {
	k, ttl := c.Entry(keyID, sum)
	ok, err := c.rdb.SetNX(ctx, k, 1, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("replay cache: %w", err)
	}
	return ok, nil
}

// Entry is the Redis key that records the use of signature sum by keyID and how long it
// lives, for a caller that sets it with SET NX inside a script of its own (the edge sets
// it together with the credential's rate budget, in one round trip).
func (c *Cache) Entry(keyID string, sum []byte) (string, time.Duration) {
	return c.prefix + "sig:" + keyID + ":" + base64.RawStdEncoding.EncodeToString(sum), c.ttl
}
