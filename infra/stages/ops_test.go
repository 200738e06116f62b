package stages

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"rental/infra/config"
	"rental/infra/health"
	"rental/infra/metrics"
	"rental/infra/pg"
	"rental/infra/testenv"
)

// probe serves the ops routes of r and returns GET path's status and body.
func probe(t *testing.T, r *health.Readiness, path string) (int, health.ReadyReport) {
	t.Helper()
	mux := http.NewServeMux()
	for _, rt := range OpsRoutes(r) {
		mux.Handle(rt.Pattern, rt.Handler)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	var rep health.ReadyReport
	if path == "/readyz" {
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatalf("readyz body %q: %v", rec.Body.String(), err)
		}
	}
	return rec.Code, rep
}

// eventually polls /readyz until it answers want or 10 s passed.
func eventually(t *testing.T, r *health.Readiness, want int) health.ReadyReport {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, rep := probe(t, r, "/readyz")
		if code == want {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz: %d %+v, want %d", code, rep, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestReadinessFollowsThePostgresConnection(t *testing.T) {
	db := testenv.Postgres(t)
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	ctx := context.Background()
	pool, err := pg.ConnectStage(ctx, u.String(), "relay", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	r := &health.Readiness{}
	AddPostgres(r, pool)

	if code, _ := probe(t, r, "/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	eventually(t, r, 200)

	proxy.Cut()
	rep := eventually(t, r, 503)
	if rep.Status != "not_ready" || rep.NotReady["postgres"] == "" {
		t.Fatalf("cut: %+v, want postgres named as not ready", rep)
	}
	if code, _ := probe(t, r, "/healthz"); code != 200 {
		t.Fatalf("healthz while postgres is cut: %d; liveness must not follow dependencies", code)
	}

	proxy.Restore()
	rep = eventually(t, r, 200)
	if rep.Status != "ready" || len(rep.NotReady) != 0 {
		t.Fatalf("restored: %+v", rep)
	}
}

// The edge's readiness is its own dependencies: a chain follower that stopped hours ago
// makes GET /v1/status report payments down, but must not pull the edge replicas.
func TestEdgeStaysReadyWhileChainwatchIsStale(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx,
		`INSERT INTO chain_cursor (name, block_num, block_hash, updated_at) VALUES ($1, 1, 'h', now() - interval '3 hours')
		 ON CONFLICT (name) DO UPDATE SET updated_at = now() - interval '3 hours'`, health.ScannerCursorName); err != nil {
		t.Fatal(err)
	}
	if age, ok, err := health.NewPostgres(db.Pool).ScannerAge(ctx); err != nil || !ok || age < time.Hour {
		t.Fatalf("stale cursor not seen: %v %v %v", age, ok, err)
	}
	cfg := config.Config{RedisURL: testenv.RedisURL(t)}
	p := &Process{Ctx: ctx, Cfg: cfg, Pool: db.Pool}
	r, err := Readiness(p, "edge")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rep := eventually(t, r, 200)
	if len(rep.Checked) != 2 || rep.Checked[0] != "postgres" || rep.Checked[1] != "redis" {
		t.Fatalf("edge checks %v, want postgres and redis", rep.Checked)
	}
}

// The probes are served on the metrics listener.
func TestOpsRoutesOnTheMetricsListener(t *testing.T) {
	r := &health.Readiness{}
	r.Add("always", func(context.Context) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freeAddr(t)
	go func() {
		_ = metrics.Run(ctx, addr, metrics.NewRegistry(), NewLogger(nopWriter{}, "json", "info"), OpsRoutes(r)...)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		for {
			resp, err := http.Get("http://" + addr + path)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("%s: %d", path, resp.StatusCode)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
