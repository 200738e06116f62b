package edge

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"rental/schemas/apierr"
)

var generatedID = regexp.MustCompile(`^req_[0-9a-f]{24}$`)

func TestRequestIDOnEveryResponse(t *testing.T) {
	ts := startServer(t,
		withHandler("GET /v1/market", func(context.Context, *fasthttp.RequestCtx) error { panic("boom") }))

	cases := []struct {
		name, method, path string
		status             int
		envelope           bool
	}{
		{"success", "GET", "/v1/status", 200, false},
		{"not implemented", "GET", "/v1/prices", 501, true},
		{"unknown route", "GET", "/v1/nope", 404, true},
		{"wrong method", "DELETE", "/v1/status", 405, true},
		{"panic", "GET", "/v1/market", 500, true},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.do(t, c.method, c.path, "", "")
			if r.status != c.status {
				t.Fatalf("HTTP %d, want %d: %s", r.status, c.status, r.body)
			}
			id := r.header.Get("X-Request-Id")
			if !generatedID.MatchString(id) {
				t.Fatalf("X-Request-Id %q is not req_ + 24 hex", id)
			}
			if seen[id] {
				t.Fatalf("X-Request-Id %q repeated", id)
			}
			seen[id] = true
			if c.envelope {
				envelopeOf(t, r) // request_id equals the header
			}
		})
	}
}

func TestRequestIDEchoedOnlyWhenWellFormed(t *testing.T) {
	ts := startServer(t)
	good := "client-7f3a:retry.2_x"
	r := ts.do(t, "GET", "/v1/orders", "", "", "X-Request-Id", good)
	if got := r.header.Get("X-Request-Id"); got != good {
		t.Fatalf("well-formed client id not echoed: got %q", got)
	}
	envelopeOf(t, r)

	for _, bad := range []string{"short", strings.Repeat("a", 129), "has space in it", "semi;colon;id", "<script>x</script>"} {
		r := ts.do(t, "GET", "/v1/orders", "", "", "X-Request-Id", bad)
		if got := r.header.Get("X-Request-Id"); !generatedID.MatchString(got) {
			t.Errorf("client id %q: got X-Request-Id %q, want a generated one", bad, got)
		}
	}
}

func TestUnknownRouteEnvelope(t *testing.T) {
	ts := startServer(t)
	for _, path := range []string{"/v1/nope", "/v2/status", "/", "/v1/status/", "/V1/STATUS", "/v1/orders/abc/nope"} {
		r := ts.do(t, "GET", path, "", "")
		e := wantError(t, r, 404, 2050, "route_not_found", "path")
		d, _ := e["details"].(map[string]any)
		if d["constraint"] != "unknown_route" || e["retryable"] != false {
			t.Errorf("%s: details %v retryable %v", path, d, e["retryable"])
		}
		if r.header.Get("Location") != "" {
			t.Errorf("%s: redirected to %s; an API must not redirect", path, r.header.Get("Location"))
		}
	}
}

func TestWrongMethodEnvelope(t *testing.T) {
	ts := startServer(t)
	cases := map[string]string{
		"POST /v1/status":             "GET, HEAD",
		"PUT /v1/session":             "DELETE, GET, HEAD, POST",
		"OPTIONS /v1/orders":          "GET, HEAD, POST",
		"GET /v1/orders/o_1/reclaim":  "POST",
		"POST /v1/subscriptions/s_1":  "DELETE, GET, HEAD, PATCH",
		"PATCH /v1/market/history":    "GET, HEAD",
		"PUT /v1/subscriptions/plans": "GET, HEAD",
	}
	for req, allow := range cases {
		method, path, _ := strings.Cut(req, " ")
		r := ts.do(t, method, path, "", "")
		e := wantError(t, r, 405, 2051, "method_not_allowed", "method")
		if got := r.header.Get("Allow"); got != allow {
			t.Errorf("%s: Allow %q, want %q", req, got, allow)
		}
		if d, _ := e["details"].(map[string]any); d["constraint"] != "method_not_allowed" {
			t.Errorf("%s: details %v", req, d)
		}
	}
}

func TestPanicAnswersInternalError(t *testing.T) {
	ts := startServer(t,
		withHandler("GET /v1/market", func(context.Context, *fasthttp.RequestCtx) error {
			panic("secret detail of the panic")
		}))
	r := ts.do(t, "GET", "/v1/market", "", "")
	e := wantError(t, r, 500, 9000, "internal_error", nil)
	if e["retryable"] != true || strings.Contains(string(r.body), "secret") {
		t.Fatalf("panic leaked or wrong retryable: %s", r.body)
	}
	// The server survives the panic.
	if r := ts.do(t, "GET", "/v1/status", "", ""); r.status != 200 {
		t.Fatalf("after panic: HTTP %d", r.status)
	}
}

func TestErrorMapping(t *testing.T) {
	ts := startServer(t,
		withHandler("GET /v1/market", func(context.Context, *fasthttp.RequestCtx) error {
			return fmt.Errorf("query: %w", errors.New("dial tcp 10.0.0.5:5432: password=hunter2"))
		}),
		withHandler("GET /v1/prices", func(_ context.Context, rc *fasthttp.RequestCtx) error {
			rc.SetBodyString("partial output that must not survive")
			return fmt.Errorf("limiter: %w", apierr.RateLimited.New("slow down").WithRetryAfter(7))
		}),
		withHandler("GET /v1/orderbook", func(context.Context, *fasthttp.RequestCtx) error {
			return apierr.InsufficientFunds.New("need more").With("required_sun", 5_000_000).With("available_sun", 1)
		}),
		withHandler("GET /v1/balance", func(context.Context, *fasthttp.RequestCtx) error {
			return apierr.OrderNotFound // a bare catalogue code
		}),
	)

	t.Run("internal error text never reaches the client", func(t *testing.T) {
		r := ts.do(t, "GET", "/v1/market", "", "")
		e := wantError(t, r, 500, 9000, "internal_error", nil)
		if strings.Contains(string(r.body), "hunter2") || strings.Contains(string(r.body), "10.0.0.5") {
			t.Fatalf("internal error leaked: %s", r.body)
		}
		if e["message"] != apierr.InternalError.Desc {
			t.Errorf("message %q", e["message"])
		}
	})
	t.Run("wrapped catalogue error keeps code, message and Retry-After; no details key when empty", func(t *testing.T) {
		r := ts.do(t, "GET", "/v1/prices", "", "")
		e := wantError(t, r, 429, 1100, "rate_limited", nil)
		if r.header.Get("Retry-After") != "7" || e["message"] != "slow down" || e["retryable"] != true {
			t.Fatalf("Retry-After %q, error %v", r.header.Get("Retry-After"), e)
		}
		if _, has := e["details"]; has {
			t.Errorf("empty details present: %s", r.body)
		}
		if strings.Contains(string(r.body), "partial output") {
			t.Errorf("handler output before the error survived: %s", r.body)
		}
	})
	t.Run("details pass through", func(t *testing.T) {
		r := ts.do(t, "GET", "/v1/orderbook", "", "")
		e := wantError(t, r, 402, 4001, "insufficient_funds", nil)
		d, _ := e["details"].(map[string]any)
		if d["required_sun"] != float64(5_000_000) || d["available_sun"] != float64(1) {
			t.Errorf("details %v", d)
		}
	})
	t.Run("bare code uses the catalogue text", func(t *testing.T) {
		r := ts.do(t, "GET", "/v1/balance", "", "")
		e := wantError(t, r, 404, 3001, "order_not_found", nil)
		if e["message"] != apierr.OrderNotFound.Desc {
			t.Errorf("message %q", e["message"])
		}
	})
}
