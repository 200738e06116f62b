package main_test

import (
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"rental/infra/testenv"
)

// The dev stack started while Redis is down waits for it (one log line naming the fix),
// and once a redis-server answers it logs that once and serves: GET /v1/status answers 200.
func TestDevStackStartedWithRedisDownServesOnceRedisAnswers(t *testing.T) {
	s := newStack(t)
	redisSrv := testenv.NewRedisServer(t) // not started yet
	s.startWaitingFor(t, "redis", []string{"REDIS_URL=" + redisSrv.URL()}, func() { redisSrv.Start(true) })
}

// The dev stack started while Postgres refuses connections (nothing listens at
// DATABASE_URL's address) waits for it instead of exiting, then migrates and serves once
// Postgres answers there.
func TestDevStackStartedWithPostgresDownServesOncePostgresAnswers(t *testing.T) {
	s := newStack(t)
	u, err := url.Parse(s.db)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	proxy.Cut()
	u.Host = proxy.Addr()
	s.startWaitingFor(t, "postgres", []string{"DATABASE_URL=" + u.String()}, proxy.Restore)
}

// startWaitingFor starts the stack with env added, sees it log that it waits for dep (and
// stay up), calls answer to bring dep up, and sees the stack log that dep answered and serve
// GET /v1/status 200; then it stops the stack with SIGTERM.
func (s *stack) startWaitingFor(t *testing.T, dep string, env []string, answer func()) {
	log := &testenv.LogBuffer{}
	cmd := exec.Command(s.bin)
	cmd.Env = append(append([]string{}, s.env...), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a minute; log:\n%s", what, log.String())
			}
		}
	}
	waiting := dep + " unavailable at start; waiting for it"
	waitFor("waiting for "+dep, func() bool { return strings.Contains(log.String(), waiting) })
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the dev stack exited instead of waiting: %v; log:\n%s", err, log.String())
	}

	answer()
	waitFor("GET /v1/status 200", func() bool {
		resp, err := http.Get("http://" + s.api + "/v1/status")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if out := log.String(); strings.Count(out, waiting) != 1 || !strings.Contains(out, dep+" answers; starting") {
		t.Fatalf("want one waiting line and one answered line for %s; log:\n%s", dep, out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("SIGTERM exit: %v\nlog:\n%s", err, log.String())
	}
}
