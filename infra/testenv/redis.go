package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	redisOnce sync.Once
	redisURL  string
	redisErr  error
)

// Redis returns a client and a key prefix unique to the test; keys under the prefix are
// deleted when the test ends. Tests share one server, so they must use the prefix.
func Redis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	redisOnce.Do(func() {
		if v := os.Getenv("REDIS_URL"); v != "" {
			redisURL = v
			return
		}
		redisURL, redisErr = containerRedis()
	})
	if redisErr != nil {
		t.Fatalf("redis: %v", redisErr)
	}
	if redisURL == "" {
		skipNoService(t, "redis", "REDIS_URL")
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatalf("REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s is unreachable (%v); start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" --appendonly no", redisURL, err)
	}
	prefix := fmt.Sprintf("t%d:", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		c.Close()
	})
	return c, prefix
}

// RedisURL returns the URL of the test Redis server (after Redis(t) has resolved it).
func RedisURL(t testing.TB) string {
	t.Helper()
	Redis(t)
	return redisURL
}
