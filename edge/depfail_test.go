package edge

import (
	"context"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/valyala/fasthttp"

	"rental/infra/ratelimit"
	"rental/infra/testenv"
)

// A handler whose Postgres refuses connections stored nothing: 503 9003 with Retry-After,
// not 500 9000 "outcome unknown".
func TestPostgresRefusingAnswers9003(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ts := startServer(t, withHandler("POST /v1/quotes", func(ctx context.Context, rc *fasthttp.RequestCtx) error {
		_, err := pool.Exec(ctx, `INSERT INTO nowhere VALUES (1)`)
		return err
	}))
	r := ts.do(t, "POST", "/v1/quotes", "application/json", `{}`)
	e := wantError(t, r, 503, 9003, "dependency_unavailable", nil)
	if e["retryable"] != true || r.header.Get("Retry-After") != "1" {
		t.Fatalf("retryable %v Retry-After %q", e["retryable"], r.header.Get("Retry-After"))
	}
}

// With Redis down the per-IP budget is still enforced, by the replica's own budget.
func TestBudgetsHoldWithRedisDown(t *testing.T) {
	pr := testenv.NewRedisServer(t)
	pr.Start(true)
	rdb := pr.Client()
	t.Cleanup(func() { rdb.Close() })
	ts := startServer(t, withOptions(func(o *Options) {
		o.Limiter = ratelimit.New(rdb, "p:")
		o.RateLimits = RateLimits{IP: redis_rate.Limit{Rate: 5, Burst: 5, Period: time.Second}}
	}))
	pr.Stop()
	codes := map[int]int{}
	for range 12 {
		codes[ts.do(t, "GET", "/v1/status", "", "").status]++
	}
	if codes[200] < 4 || codes[200] > 7 || codes[429] < 5 {
		t.Fatalf("answers with Redis down: %v; want about 5 served and the rest 429", codes)
	}
}
