// Package redisx connects to Redis. Redis holds only what may be lost (rate-limit buckets,
// replay cache, short caches, locks with TTL); losing it must never lose money or events.
package redisx

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Connect parses url, connects and checks the server answers. The error names the command
// that starts a local server, the usual fix on a developer machine.
func Connect(ctx context.Context, url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: REDIS_URL is not a valid redis:// URL: %w", err)
	}
	c := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis at %s is unreachable (%v); start it with: "+
			"redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" --appendonly no, "+
			"or set REDIS_URL", opt.Addr, err)
	}
	return c, nil
}
