package edge

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/health"
	"rental/infra/testenv"
)

// supplyStub stands in for the TRON node (the node itself is tested in infra/health).
type supplyStub struct {
	energy int64
	err    error
}

func (s supplyStub) AvailableEnergy(context.Context) (int64, error) { return s.energy, s.err }

var timestamp = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// checkStatusShape asserts the ServiceStatus record of the spec, field by field.
func checkStatusShape(t *testing.T, r response) map[string]any {
	t.Helper()
	if r.header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Fatalf("Content-Type %q", r.header.Get("Content-Type"))
	}
	if r.json["network"] != "nile" || !timestamp.MatchString(asString(r.json["as_of"])) {
		t.Errorf("network %v as_of %v", r.json["network"], r.json["as_of"])
	}
	comps, ok := r.json["components"].(map[string]any)
	if !ok {
		t.Fatalf("no components: %s", r.body)
	}
	fields := map[string][]string{
		"api":      {"status"},
		"database": {"status"},
		"payments": {"status", "scanner_updated_s_ago"},
		"delivery": {"status", "orders_1h", "failed_1h", "median_delivery_s_1h"},
		"supply":   {"status", "available_energy"},
	}
	for name, keys := range fields {
		c, ok := comps[name].(map[string]any)
		if !ok {
			t.Fatalf("component %s missing: %s", name, r.body)
		}
		for _, k := range keys {
			if _, ok := c[k]; !ok {
				t.Errorf("components.%s.%s missing: %s", name, k, r.body)
			}
		}
		if len(c) != len(keys) {
			t.Errorf("components.%s has extra fields: %v", name, c)
		}
	}
	return comps
}

func asString(v any) string { s, _ := v.(string); return s }

func component(comps map[string]any, name string) map[string]any {
	c, _ := comps[name].(map[string]any)
	return c
}

func TestStatusOperationalWithRealDatabase(t *testing.T) {
	db := testenv.Postgres(t)
	if _, err := db.Pool.Exec(context.Background(),
		`INSERT INTO chain_cursor (name, block_num, block_hash, updated_at) VALUES ('chainwatch', 100, 'abc', now())`); err != nil {
		t.Fatal(err)
	}
	checker := health.NewChecker(health.Options{
		Database: health.NewPostgres(db.Pool),
		Supply:   supplyStub{energy: 2_500_000},
	})
	ts := startServer(t, withStatus(checker))

	r := ts.do(t, "GET", "/v1/status", "", "")
	if r.status != 200 {
		t.Fatalf("HTTP %d: %s", r.status, r.body)
	}
	comps := checkStatusShape(t, r)
	if r.json["status"] != "operational" {
		t.Errorf("status %v: %s", r.json["status"], r.body)
	}
	if component(comps, "database")["status"] != "operational" || component(comps, "api")["status"] != "operational" {
		t.Errorf("components %v", comps)
	}
	p := component(comps, "payments")
	if p["status"] != "operational" || p["scanner_updated_s_ago"] != float64(0) {
		t.Errorf("payments %v", p)
	}
	d := component(comps, "delivery")
	if d["status"] != "operational" || d["orders_1h"] != float64(0) || d["median_delivery_s_1h"] != nil {
		t.Errorf("delivery %v", d)
	}
	if s := component(comps, "supply"); s["status"] != "operational" || s["available_energy"] != float64(2_500_000) {
		t.Errorf("supply %v", s)
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
}

func TestStatusDegradedWithoutScannerCursor(t *testing.T) {
	db := testenv.Postgres(t)
	checker := health.NewChecker(health.Options{
		Database: health.NewPostgres(db.Pool),
		Supply:   supplyStub{energy: 1},
	})
	ts := startServer(t, withStatus(checker))
	r := ts.do(t, "GET", "/v1/status", "", "")
	comps := checkStatusShape(t, r)
	p := component(comps, "payments")
	if r.status != 200 || r.json["status"] != "degraded" || p["status"] != "degraded" || p["scanner_updated_s_ago"] != nil {
		t.Fatalf("HTTP %d: %s", r.status, r.body)
	}
}

func TestStatus503WhenDatabaseUnreachable(t *testing.T) {
	// Nothing listens on port 1 of 127.0.0.1: every connection attempt is refused.
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	checker := health.NewChecker(health.Options{
		Database: health.NewPostgres(pool),
		Supply:   supplyStub{err: errors.New("node unreachable")},
		Timeout:  3 * time.Second,
	})
	ts := startServer(t, withStatus(checker))
	r := ts.do(t, "GET", "/v1/status", "", "")
	if r.status != 503 {
		t.Fatalf("HTTP %d, want 503: %s", r.status, r.body)
	}
	comps := checkStatusShape(t, r) // the same body shape as a 200
	if r.json["status"] != "down" || component(comps, "database")["status"] != "down" ||
		component(comps, "api")["status"] != "operational" || component(comps, "supply")["status"] != "down" {
		t.Fatalf("body %s", r.body)
	}
	if _, isErr := r.json["error"]; isErr {
		t.Fatalf("503 status must carry the status record, not an error envelope: %s", r.body)
	}
}
