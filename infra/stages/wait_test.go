package stages

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"rental/infra/redisx"
	"rental/infra/testenv"
)

// A stage started while Redis is down waits for it and connects once it answers, instead
// of exiting; cancelled while waiting, it returns the last error.
func TestWaitForDependencyStartedLater(t *testing.T) {
	srv := testenv.NewRedisServer(t) // not started yet
	url := srv.URL()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		c   *redis.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := WaitFor(ctx, log, "redis", func(ctx context.Context) (*redis.Client, error) { return redisx.Connect(ctx, url) })
		done <- result{c, err}
	}()
	time.Sleep(1500 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("returned before Redis started: %v", r.err)
	default:
	}
	srv.Start(false)
	r := <-done
	if r.err != nil {
		t.Fatalf("did not connect once Redis answered: %v", r.err)
	}
	defer r.c.Close()
	if err := r.c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	// Cancelled while waiting: the last error comes back.
	cctx, ccancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer ccancel()
	if _, err := WaitFor(cctx, log, "redis", func(ctx context.Context) (*redis.Client, error) {
		return redisx.Connect(ctx, "redis://127.0.0.1:1/0")
	}); err == nil {
		t.Fatal("connected to nothing")
	}
}
