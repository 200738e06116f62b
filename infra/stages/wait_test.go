package stages

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"rental/infra/redisx"
)

// A stage started while Redis is down waits for it and connects once it answers, instead
// of exiting; cancelled while waiting, it returns the last error.
func TestWaitForDependencyStartedLater(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is needed: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
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
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
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
