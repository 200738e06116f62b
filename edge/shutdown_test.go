package edge

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// slowHandler signals when it starts, then holds the request until released (or its
// context ends, reporting that on ctxDone).
type slowHandler struct {
	started, release, ctxDone chan struct{}
}

func newSlowHandler() *slowHandler {
	return &slowHandler{started: make(chan struct{}, 1), release: make(chan struct{}), ctxDone: make(chan struct{}, 1)}
}

func (h *slowHandler) serve(ctx context.Context, rc *fasthttp.RequestCtx) error {
	h.started <- struct{}{}
	select {
	case <-h.release:
		return WriteJSON(rc, 200, map[string]string{"result": "finished"})
	case <-ctx.Done():
		h.ctxDone <- struct{}{}
		return ctx.Err()
	}
}

type result struct {
	status int
	body   string
	err    error
}

func getAsync(url string) chan result {
	out := make(chan result, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			out <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		out <- result{status: resp.StatusCode, body: string(b), err: err}
	}()
	return out
}

func TestGracefulShutdownDrainsInFlightRequest(t *testing.T) {
	slow := newSlowHandler()
	ts := startServer(t, withHandler("GET /v1/prices", slow.serve))
	addr := strings.TrimPrefix(ts.url, "http://")

	inflight := getAsync(ts.url + "/v1/prices")
	<-slow.started
	ts.stop() // shutdown begins while the request is running

	// New connections are refused once the listener is closed.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("listener still accepting after shutdown began")
		}
		time.Sleep(10 * time.Millisecond) // polling the listener state
	}
	select {
	case <-ts.done:
		t.Fatalf("Serve returned (%v) while a request was in flight", ts.err)
	default:
	}

	close(slow.release)
	r := <-inflight
	if r.err != nil || r.status != 200 || !strings.Contains(r.body, "finished") {
		t.Fatalf("in-flight request: %+v", r)
	}
	select {
	case <-ts.done:
		if ts.err != nil {
			t.Fatalf("Serve: %v", ts.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the drain")
	}
}

func TestShutdownGraceExpiresCancelsHandlers(t *testing.T) {
	slow := newSlowHandler()
	ts := startServer(t, withHandler("GET /v1/prices", slow.serve),
		withOptions(func(o *Options) { o.ShutdownGrace = 200 * time.Millisecond }))

	inflight := getAsync(ts.url + "/v1/prices")
	<-slow.started
	ts.stop()
	select {
	case <-ts.done:
		if !errors.Is(ts.err, context.DeadlineExceeded) {
			t.Fatalf("Serve returned %v, want the grace deadline error", ts.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the grace period")
	}
	select {
	case <-slow.ctxDone:
	case <-time.After(5 * time.Second):
		t.Fatal("handler context not cancelled after the grace period")
	}
	<-inflight
}
