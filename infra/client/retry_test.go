package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"rental/infra/reqsign"
	"rental/schemas/apierr"
)

// fakeClock advances only when the client sleeps, so every wait is observable.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (f *fakeClock) Now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }
func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, d)
	f.now = f.now.Add(d)
	return ctx.Err()
}
func (f *fakeClock) Waits() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...)
}

// maxJitter makes full jitter pick the top of its range, so the waits are the ceilings.
func maxJitter(max time.Duration) time.Duration { return max }

// attempt is one request the loopback server received.
type attempt struct {
	method, target string
	body           []byte
	header         http.Header
}

// script is a loopback API server answering the n-th request with answers[n] (the last
// one repeats); it checks every request's signature against the canonical string.
type script struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	attempts []attempt
	lookups  []string // GET /v1/orders?... targets
	found    bool     // whether the look-up by client_order_id finds the order
}

type answer func(w http.ResponseWriter)

func reply(status int, body string, header ...string) answer {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-Request-Id", "req_test")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func apiError(k *apierr.Code, header ...string) answer {
	return reply(k.Status, fmt.Sprintf(`{"error":{"code":%d,"slug":%q,"message":"m","field":null,"retryable":%v,"details":{}},"request_id":"req_test"}`,
		k.Code, k.Slug, k.Retryable), header...)
}

// drop closes the connection without an answer.
func drop(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

const orderJSON = `{"id":"ord_1","client_order_id":"co-1","status":"created","resource":"energy","amount":65000,"receiver":"TXYZ","unit_price_sun":1.5,"total_amount_sun":97500}`

func newScript(t *testing.T, answers ...answer) *script {
	s := &script{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum, ok := reqsign.DecodeSign([]byte(r.Header.Get(reqsign.HeaderSign)))
		c := reqsign.Canonical(nil, r.Header.Get(reqsign.HeaderTimestamp), r.Method, r.RequestURI, body)
		if r.Header.Get(reqsign.HeaderKey) != "ak_test_k" || !ok || !reqsign.Equal(sum, reqsign.Sum([]byte("sk_test_s"), c)) {
			t.Errorf("%s %s: signature does not verify", r.Method, r.RequestURI)
		}
		s.mu.Lock()
		if r.Method == "GET" && r.URL.Path == "/v1/orders" {
			s.lookups = append(s.lookups, r.RequestURI)
			found := s.found
			s.mu.Unlock()
			if found {
				reply(200, `{"data":[`+orderJSON+`],"next_cursor":null}`)(w)
			} else {
				reply(200, `{"data":[],"next_cursor":null}`)(w)
			}
			return
		}
		n := len(s.attempts)
		s.attempts = append(s.attempts, attempt{method: r.Method, target: r.RequestURI, body: body, header: r.Header.Clone()})
		s.mu.Unlock()
		answers[min(n, len(answers)-1)](w)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *script) client(k *fakeClock) *Client {
	return New(s.srv.URL, "ak_test_k", "sk_test_s", WithClock(k), WithJitter(maxJitter),
		WithHTTPClient(&http.Client{Timeout: 5 * time.Second}))
}

func waitsEqual(t *testing.T, got []time.Duration, want ...time.Duration) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
}

var order = OrderRequest{ClientOrderID: "co-1", Resource: "energy", Amount: 65000, Tier: "5m", Receiver: "TXYZ"}

// 429 with Retry-After, 503, a dropped connection, then the order: the waits are
// Retry-After (2 s), then the jitter ceilings of retries 2 and 3 (500 ms, 1 s); every
// attempt carries the same body (same client_order_id) under a fresh signature.
func TestCreateOrderRetriesWithSameClientOrderID(t *testing.T) {
	s := newScript(t, apiError(apierr.RateLimited, "Retry-After", "2"), apiError(apierr.ChainUnavailable), drop, reply(201, orderJSON))
	k := newFakeClock()
	got, err := s.client(k).CreateOrder(context.Background(), order)
	if err != nil {
		t.Fatal(err)
	}
	if got.Order.ID != "ord_1" || got.Replayed || got.LookedUp || got.Response.Attempts != 4 {
		t.Fatalf("created %+v (attempts %d)", got, got.Response.Attempts)
	}
	waitsEqual(t, k.Waits(), 2*time.Second, 500*time.Millisecond, time.Second)
	if len(s.attempts) != 4 {
		t.Fatalf("%d attempts reached the server, want 4", len(s.attempts))
	}
	signs := map[string]bool{}
	for i, a := range s.attempts {
		var b OrderRequest
		if a.method != "POST" || a.target != "/v1/orders" || json.Unmarshal(a.body, &b) != nil || b != order ||
			string(a.body) != string(s.attempts[0].body) {
			t.Fatalf("attempt %d: %s %s %s", i+1, a.method, a.target, a.body)
		}
		signs[a.header.Get(reqsign.HeaderSign)] = true
	}
	if len(signs) != 4 {
		t.Fatalf("%d distinct signatures over 4 attempts: each retry must be signed afresh", len(signs))
	}
	if len(s.lookups) != 0 {
		t.Fatalf("look-ups %v after a definite answer", s.lookups)
	}
}

// A server that keeps answering 503: the waits follow 250 ms x 2^n with full jitter (at its
// ceiling here), capped at 30 s, until the next wait would pass 60 s in total; then the
// order is looked up by client_order_id.
func TestCreateOrderGivesUpAfterAboutAMinuteThenLooksUp(t *testing.T) {
	for _, found := range []bool{true, false} {
		t.Run(fmt.Sprintf("found=%v", found), func(t *testing.T) {
			s := newScript(t, apiError(apierr.ProviderUnavailable))
			s.found = found
			k := newFakeClock()
			got, err := s.client(k).CreateOrder(context.Background(), order)
			ms := time.Millisecond
			// 0.25+0.5+1+2+4+8+16 = 31.75 s; the next ceiling, 30 s, would end at 61.75 s.
			waitsEqual(t, k.Waits(), 250*ms, 500*ms, time.Second, 2*time.Second, 4*time.Second, 8*time.Second, 16*time.Second)
			if len(s.attempts) != 8 {
				t.Fatalf("%d attempts, want 8", len(s.attempts))
			}
			for _, a := range s.attempts {
				if string(a.body) != string(s.attempts[0].body) {
					t.Fatalf("a retry changed the body: %s vs %s", a.body, s.attempts[0].body)
				}
			}
			if len(s.lookups) != 1 || s.lookups[0] != "/v1/orders?client_order_id=co-1&limit=1" {
				t.Fatalf("look-ups %v", s.lookups)
			}
			if found {
				if err != nil || !got.LookedUp || got.Order.ID != "ord_1" {
					t.Fatalf("found by look-up: %+v, %v", got, err)
				}
				return
			}
			var gave *GiveUpError
			var ae *Error
			if !errors.As(err, &gave) || gave.Attempts != 8 || gave.Waited != 31750*ms || !errors.As(err, &ae) ||
				!errors.Is(err, apierr.ProviderUnavailable) || ae.Status != 503 || !ae.Retryable {
				t.Fatalf("error %v", err)
			}
		})
	}
}

// The 30 s cap applies to the computed wait and to the total; a long Retry-After that would
// pass the budget makes the client give up rather than wait.
func TestWaitCapAndRetryAfterBeyondBudget(t *testing.T) {
	t.Run("cap", func(t *testing.T) {
		s := newScript(t, apiError(apierr.InternalError))
		k := newFakeClock()
		_, err := s.client(k).Do(context.Background(), "GET", "/v1/balance", nil)
		if err == nil {
			t.Fatal("no error")
		}
		c := New("http://x", "", "", WithJitter(maxJitter))
		for n, want := range map[int]time.Duration{1: 250 * time.Millisecond, 8: 30 * time.Second, 20: 30 * time.Second} {
			if got := c.backoff(n, errors.New("x")); got != want {
				t.Errorf("wait before retry %d: %s, want %s", n+1, got, want)
			}
		}
	})
	t.Run("retry-after beyond budget", func(t *testing.T) {
		s := newScript(t, apiError(apierr.QuotaExceeded, "Retry-After", "3600"))
		k := newFakeClock()
		_, err := s.client(k).Do(context.Background(), "GET", "/v1/balance", nil)
		var gave *GiveUpError
		if !errors.As(err, &gave) || gave.Attempts != 1 || len(k.Waits()) != 0 {
			t.Fatalf("error %v, waits %v", err, k.Waits())
		}
	})
	t.Run("full jitter draws below the ceiling", func(t *testing.T) {
		var ceilings []time.Duration
		c := New("http://x", "", "", WithJitter(func(max time.Duration) time.Duration { ceilings = append(ceilings, max); return max / 4 }))
		if got := c.backoff(3, errors.New("x")); got != 250*time.Millisecond || ceilings[0] != time.Second {
			t.Fatalf("wait %s from ceiling %v", got, ceilings)
		}
	})
}

// Codes the spec says not to retry are returned after one attempt; 4002 and 4004 are retried.
func TestWhatIsRetried(t *testing.T) {
	for _, tc := range []struct {
		code     *apierr.Code
		method   string
		attempts int
	}{
		{apierr.ValidationFailed, "POST", 1},
		{apierr.InvalidSignature, "GET", 1},
		{apierr.InsufficientScope, "GET", 1},
		{apierr.OrderNotFound, "GET", 1},
		{apierr.IdempotencyConflict, "POST", 1},
		{apierr.InsufficientFunds, "POST", 1}, // retried by the caller after a deposit
		{apierr.DelegationFailed, "POST", 1},  // never with the same client_order_id
		{apierr.NotImplemented, "GET", 1},
		{apierr.BalanceReserved, "POST", 2},
		{apierr.LedgerConflict, "POST", 2},
		{apierr.ConcurrencyLimited, "POST", 2},
		{apierr.SupplyPaused, "POST", 2},
	} {
		t.Run(tc.code.Slug, func(t *testing.T) {
			s := newScript(t, apiError(tc.code), reply(201, orderJSON))
			k := newFakeClock()
			var err error
			if tc.method == "POST" {
				_, err = s.client(k).CreateOrder(context.Background(), order)
			} else {
				_, err = s.client(k).Order(context.Background(), "ord_1")
			}
			if len(s.attempts) != tc.attempts {
				t.Fatalf("%d attempts, want %d", len(s.attempts), tc.attempts)
			}
			var ae *Error
			if tc.attempts == 1 && (!errors.As(err, &ae) || ae.Code != tc.code.Code || ae.Slug != tc.code.Slug || !errors.Is(err, tc.code)) {
				t.Fatalf("error %v", err)
			}
			if tc.attempts == 2 && err != nil {
				t.Fatal(err)
			}
			if len(s.lookups) != 0 {
				t.Fatalf("look-up after a definite answer: %v", s.lookups)
			}
		})
	}
}

// A write that is not idempotent (reclaim) is not repeated after a 503 or a dropped
// connection (its outcome is unknown), but is after a 429 (refused before any work).
func TestNonIdempotentWrite(t *testing.T) {
	for _, tc := range []struct {
		name     string
		first    answer
		attempts int
	}{{"503", apiError(apierr.ChainUnavailable), 1}, {"dropped", drop, 1}, {"429", apiError(apierr.RateLimited, "Retry-After", "1"), 2}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t, tc.first, reply(202, orderJSON))
			_, _ = s.client(newFakeClock()).Reclaim(context.Background(), "ord_1")
			if len(s.attempts) != tc.attempts {
				t.Fatalf("%d attempts, want %d", len(s.attempts), tc.attempts)
			}
		})
	}
}

// 3015 request_in_progress: the create is not repeated; the order is looked up.
func TestRequestInProgressLooksUp(t *testing.T) {
	s := newScript(t, apiError(apierr.RequestInProgress, "Retry-After", "1"))
	s.found = true
	got, err := s.client(newFakeClock()).CreateOrder(context.Background(), order)
	if err != nil || !got.LookedUp || len(s.attempts) != 1 || len(s.lookups) != 1 {
		t.Fatalf("%+v, %v; attempts %d, look-ups %v", got, err, len(s.attempts), s.lookups)
	}
}

// 1003: retried once, signed at the server's clock.
func TestClockSkewRetriedOnceAtServerTime(t *testing.T) {
	k := newFakeClock()
	server := k.Now().Add(time.Minute)
	skew := reply(401, fmt.Sprintf(`{"error":{"code":1003,"slug":"signature_timestamp_skew","message":"m","field":null,"retryable":true,"details":{"server_time":%q}},"request_id":"r"}`,
		reqsign.FormatTimestamp(server)))
	s := newScript(t, skew, reply(200, `{"balance_sun":1,"balance_usdt":0,"reserved_sun":0,"available_sun":1,"as_of":"2026-01-02T03:05:05.000Z"}`))
	b, err := s.client(k).Balance(context.Background())
	if err != nil || b.BalanceSun != 1 || len(s.attempts) != 2 {
		t.Fatalf("%+v, %v, %d attempts", b, err, len(s.attempts))
	}
	ts, _ := reqsign.ParseTimestamp(s.attempts[1].header.Get(reqsign.HeaderTimestamp))
	if d := ts.Sub(server); d < 0 || d > time.Second {
		t.Fatalf("retry signed at %s, server time %s", ts, server)
	}
	// Only once: a second 1003 is returned.
	s2 := newScript(t, skew)
	if _, err := s2.client(newFakeClock()).Balance(context.Background()); !errors.Is(err, apierr.SignatureTimestampSkew) || len(s2.attempts) != 2 {
		t.Fatalf("%v after %d attempts", err, len(s2.attempts))
	}
}

// Identical requests in the same millisecond get distinct timestamps (a repeated signature
// is refused as a replay).
func TestIdenticalRequestsSignedAtDistinctMilliseconds(t *testing.T) {
	s := newScript(t, reply(200, `{"balance_sun":0}`))
	c := s.client(newFakeClock()) // the clock never moves
	for range 3 {
		if _, err := c.Balance(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for _, a := range s.attempts {
		seen[a.header.Get(reqsign.HeaderTimestamp)] = true
	}
	if len(seen) != 3 {
		t.Fatalf("timestamps %v", seen)
	}
}

// An answer without an envelope (a proxy's 502) is classified by HTTP class.
func TestNoEnvelope(t *testing.T) {
	s := newScript(t, reply(502, "<html>bad gateway</html>"), reply(200, `{"balance_sun":5}`))
	b, err := s.client(newFakeClock()).Balance(context.Background())
	if err != nil || b.BalanceSun != 5 || len(s.attempts) != 2 {
		t.Fatalf("%+v %v", b, err)
	}
}
