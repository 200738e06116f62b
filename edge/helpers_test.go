package edge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/health"
	"rental/schemas/network"
)

// testServer is an edge serving on 127.0.0.1 for one test.
type testServer struct {
	srv  *Server
	url  string
	reg  *prometheus.Registry
	stop context.CancelFunc
	done chan struct{} // closed when Serve returns
	err  error         // Serve's result, valid once done is closed
}

type serverOpt func(*Options, map[string]HandlerFunc)

func withHandler(key string, h HandlerFunc) serverOpt {
	return func(_ *Options, hs map[string]HandlerFunc) { hs[key] = h }
}

func withStatus(r StatusReporter) serverOpt {
	return func(o *Options, _ map[string]HandlerFunc) { o.Status = r }
}

func withOptions(f func(*Options)) serverOpt {
	return func(o *Options, _ map[string]HandlerFunc) { f(o) }
}

// fixedStatus reports a constant, all-operational report unless changed.
type fixedStatus struct{ r health.Report }

func (f fixedStatus) Report(context.Context) health.Report { return f.r }

func okReport() health.Report {
	age := int64(2)
	return health.Report{
		Status: health.Operational, AsOf: time.Now(), API: health.Operational, Database: health.Operational,
		Payments: health.Payments{Status: health.Operational, ScannerUpdatedSecondsAgo: &age},
		Delivery: health.Delivery{Status: health.Operational},
		Supply:   health.Supply{Status: health.Operational, AvailableEnergy: 1_000_000},
	}
}

func startServer(t *testing.T, opts ...serverOpt) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := Options{
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer:    reg,
		Network:       network.Nile,
		Status:        fixedStatus{okReport()},
		ShutdownGrace: 5 * time.Second,
	}
	hs := map[string]HandlerFunc{}
	for _, f := range opts {
		f(&o, hs)
	}
	srv, err := newServer(o, hs)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{srv: srv, url: "http://" + ln.Addr().String(), reg: reg, stop: cancel, done: make(chan struct{})}
	go func() { ts.err = srv.Serve(ctx, ln); close(ts.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ts.done:
		case <-time.After(10 * time.Second):
			t.Error("server did not stop")
		}
	})
	return ts
}

// overridden reports whether a test replaced the handler of endpoint key (withHandler).
func (ts *testServer) overridden(key string) bool {
	_, ok := ts.srv.testHandlers[key]
	return ok
}

// response is a received answer with its body decoded when it is JSON.
type response struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
	// contractErr is the OpenAPI check of an answer received where t.Fatal may not be
	// called (signedNoT); do reports its check itself.
	contractErr error
}

func (ts *testServer) do(t *testing.T, method, path, contentType, body string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, body: b}
	if err := checkContract(t, method, path, r.status, r.header, b, ts.overridden); err != nil {
		t.Error(err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &r.json); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, b)
		}
	}
	return r
}

// envelopeOf checks r is a well-formed error envelope whose request_id equals the
// X-Request-Id header, and returns its error object.
func envelopeOf(t *testing.T, r response) map[string]any {
	t.Helper()
	if got := r.header.Get("Content-Type"); got != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q, body %s", got, r.body)
	}
	e, ok := r.json["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object: %s", r.body)
	}
	for _, k := range []string{"code", "slug", "message", "field", "retryable"} {
		if _, ok := e[k]; !ok {
			t.Errorf("envelope lacks error.%s: %s", k, r.body)
		}
	}
	id := r.header.Get("X-Request-Id")
	if id == "" || r.json["request_id"] != id {
		t.Errorf("request_id %v differs from X-Request-Id %q", r.json["request_id"], id)
	}
	return e
}

func wantError(t *testing.T, r response, status int, code float64, slug string, field any) map[string]any {
	t.Helper()
	e := envelopeOf(t, r)
	if r.status != status || e["code"] != code || e["slug"] != slug || e["field"] != field {
		t.Fatalf("got HTTP %d code %v slug %v field %v, want %d %v %s %v: %s",
			r.status, e["code"], e["slug"], e["field"], status, code, slug, field, r.body)
	}
	return e
}
