package main_test

import (
	"bytes"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rental/infra/testenv"
)

// lockedLog is a process's output the test reads while the process writes it.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The dev stack started while Redis is down waits for it (one log line naming the fix),
// and once a redis-server answers it logs that once and serves: GET /v1/status answers 200.
func TestDevStackStartedWithRedisDownServesOnceRedisAnswers(t *testing.T) {
	s := newStack(t)
	redisSrv := testenv.NewRedisServer(t) // not started yet
	log := &lockedLog{}
	cmd := exec.Command(s.bin)
	cmd.Env = append(s.env, "REDIS_URL="+redisSrv.URL())
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
	waitFor("waiting for redis", func() bool { return strings.Contains(log.String(), "redis unavailable at start; waiting for it") })
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the dev stack exited instead of waiting: %v; log:\n%s", err, log.String())
	}

	redisSrv.Start(true)
	waitFor("GET /v1/status 200", func() bool {
		resp, err := http.Get("http://" + s.api + "/v1/status")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if out := log.String(); strings.Count(out, "redis unavailable at start") != 1 || !strings.Contains(out, "redis answers; starting") {
		t.Fatalf("want one waiting line and one answered line; log:\n%s", out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("SIGTERM exit: %v\nlog:\n%s", err, log.String())
	}
}
