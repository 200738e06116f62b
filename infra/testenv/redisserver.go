package testenv

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// FreeAddr returns a 127.0.0.1 address whose port was free at the moment of the call, for a
// server the test starts itself (a stage binary, a redis-server).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// RedisServer is a redis-server of the test's own, without persistence, on a free loopback
// port, for tests that stop, restart or start Redis late. Stop ends only this process (by
// its PID); Start runs it again on the same address, empty, like a restart of a Redis that
// keeps nothing. The test's cleanup stops it.
type RedisServer struct {
	Addr string
	t    testing.TB
	bin  string
	cmd  *exec.Cmd
}

// NewRedisServer reserves the address; nothing runs until Start.
func NewRedisServer(t testing.TB) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is needed: %v", err)
	}
	r := &RedisServer{Addr: FreeAddr(t), t: t, bin: bin}
	t.Cleanup(r.Stop)
	return r
}

// URL is the server's redis:// URL (database 0).
func (r *RedisServer) URL() string { return "redis://" + r.Addr + "/0" }

// Start runs the server (again) and, when wait is set, returns once it answers PING.
func (r *RedisServer) Start(wait bool) {
	r.t.Helper()
	_, port, _ := net.SplitHostPort(r.Addr)
	if _, err := strconv.Atoi(port); err != nil {
		r.t.Fatal(err)
	}
	r.cmd = exec.Command(r.bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	if !wait {
		return
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
		if i > 100 {
			r.t.Fatal("the test's redis-server did not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the server the test started, if it runs.
func (r *RedisServer) Stop() {
	if r.cmd != nil && r.cmd.Process != nil && r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
	}
}

// Client is a client of the server that fails fast while it is down (no retries, one
// 200 ms dial), so a test sees the outage at once.
func (r *RedisServer) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
}
