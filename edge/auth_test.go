package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"rental/infra/accounts"
	"rental/infra/ratelimit"
	"rental/infra/reqsign"
	"rental/schemas/scopes"
)

// Every endpoint that takes keys (and is not public) names a scope of the vocabulary, and
// every scope of the vocabulary guards at least one endpoint.
func TestEveryKeyEndpointNamesAScope(t *testing.T) {
	used := map[string]bool{}
	for _, e := range Endpoints {
		if e.Scope != "" {
			if !scopes.Valid(e.Scope) {
				t.Errorf("%s: scope %q is not in schemas/scopes", e.key(), e.Scope)
			}
			used[e.Scope] = true
		}
		if e.Auth.Has(CredKey) && !e.Auth.Has(CredPublic) && e.Scope == "" {
			t.Errorf("%s takes keys but names no scope", e.key())
		}
		if e.Class == "" {
			t.Errorf("%s has no rate class", e.key())
		}
	}
	for _, s := range scopes.All() {
		if !used[s] {
			t.Errorf("scope %s guards no endpoint", s)
		}
	}
	// Bootstrap tokens work on exactly the four endpoints of the spec.
	var boot []string
	for _, e := range Endpoints {
		if e.Auth.Has(CredBootstrap) {
			boot = append(boot, e.key())
		}
	}
	want := "POST /v1/accounts,GET /v1/accounts/deposit-address,GET /v1/account,POST /v1/api-keys"
	if strings.Join(boot, ",") != want {
		t.Errorf("bootstrap endpoints %v, want %s", boot, want)
	}
}

// Each authentication code of a signed request, produced through HTTP.
func TestSignedRequestErrors(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	k := env.key(t)
	now := time.Now()
	h := reqsign.Headers(k.ID, k.Secret, now, "GET", "/v1/account", nil)

	t.Run("ok", func(t *testing.T) {
		r := env.signed(t, k, "GET", "/v1/account", "")
		if r.status != 200 || r.json["id"] != env.acct.ID {
			t.Fatalf("HTTP %d %s", r.status, r.body)
		}
	})
	t.Run("1001 no credentials", func(t *testing.T) {
		wantError(t, env.ts.do(t, "GET", "/v1/account", "", ""), 401, 1001, "missing_credentials", nil)
	})
	t.Run("1001 one header absent", func(t *testing.T) {
		r := env.ts.do(t, "GET", "/v1/account", "", "", reqsign.HeaderKey, k.ID, reqsign.HeaderTimestamp, h[reqsign.HeaderTimestamp])
		e := wantError(t, r, 401, 1001, "missing_credentials", reqsign.HeaderSign)
		if fmt.Sprint(e["details"].(map[string]any)["missing"]) != "[X-API-SIGN]" {
			t.Errorf("details %v", e["details"])
		}
	})
	t.Run("1012 mainnet key on the testnet host, before any lookup", func(t *testing.T) {
		live := strings.Replace(k.ID, "ak_test_", "ak_live_", 1)
		r := env.ts.do(t, "GET", "/v1/account", "", "", reqsign.HeaderKey, live,
			reqsign.HeaderTimestamp, h[reqsign.HeaderTimestamp], reqsign.HeaderSign, "garbage")
		wantError(t, r, 401, 1012, "key_environment_mismatch", nil)
	})
	t.Run("1002 wrong signature", func(t *testing.T) {
		bad := accounts.CreatedKey{Key: k.Key, Secret: k.Secret + "x"}
		wantError(t, env.signed(t, bad, "GET", "/v1/account", ""), 401, 1002, "invalid_signature", nil)
	})
	t.Run("1002 body altered after signing", func(t *testing.T) {
		hh := reqsign.Headers(k.ID, k.Secret, time.Now(), "POST", "/v1/api-keys", []byte(`{"scopes":["orders.read"]}`))
		r := env.ts.do(t, "POST", "/v1/api-keys", "application/json", `{"scopes":["orders.write"]}`,
			reqsign.HeaderKey, k.ID, reqsign.HeaderTimestamp, hh[reqsign.HeaderTimestamp], reqsign.HeaderSign, hh[reqsign.HeaderSign])
		wantError(t, r, 401, 1002, "invalid_signature", nil)
	})
	t.Run("1002 query altered after signing", func(t *testing.T) {
		hh := reqsign.Headers(k.ID, k.Secret, time.Now(), "GET", "/v1/orders?limit=1", nil)
		r := env.ts.do(t, "GET", "/v1/orders?limit=2", "", "",
			reqsign.HeaderKey, k.ID, reqsign.HeaderTimestamp, hh[reqsign.HeaderTimestamp], reqsign.HeaderSign, hh[reqsign.HeaderSign])
		wantError(t, r, 401, 1002, "invalid_signature", nil)
	})
	t.Run("1002 unknown key", func(t *testing.T) {
		ghost := accounts.CreatedKey{Key: accounts.Key{ID: "ak_test_00000000000000000000000000000000"}, Secret: k.Secret}
		wantError(t, env.signed(t, ghost, "GET", "/v1/account", ""), 401, 1002, "invalid_signature", nil)
	})
	t.Run("1002 malformed timestamp", func(t *testing.T) {
		r := env.ts.do(t, "GET", "/v1/account", "", "", reqsign.HeaderKey, k.ID,
			reqsign.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10), reqsign.HeaderSign, h[reqsign.HeaderSign])
		wantError(t, r, 401, 1002, "invalid_signature", reqsign.HeaderTimestamp)
	})
	t.Run("1002 malformed signature", func(t *testing.T) {
		r := env.ts.do(t, "GET", "/v1/account", "", "", reqsign.HeaderKey, k.ID,
			reqsign.HeaderTimestamp, h[reqsign.HeaderTimestamp], reqsign.HeaderSign, "not base64!")
		wantError(t, r, 401, 1002, "invalid_signature", reqsign.HeaderSign)
	})
	for _, off := range []time.Duration{-6 * time.Second, 6 * time.Second} {
		t.Run("1003 skew "+off.String(), func(t *testing.T) {
			r := env.signedAt(t, k, time.Now().Add(off), "GET", "/v1/account", "")
			e := wantError(t, r, 401, 1003, "signature_timestamp_skew", reqsign.HeaderTimestamp)
			st, _ := e["details"].(map[string]any)["server_time"].(string)
			if got, err := time.Parse(time.RFC3339Nano, st); err != nil || time.Since(got).Abs() > 5*time.Second {
				t.Errorf("details.server_time %q", st)
			}
		})
	}
	t.Run("4 s skew passes", func(t *testing.T) {
		if r := env.signedAt(t, k, time.Now().Add(-4*time.Second), "GET", "/v1/account", ""); r.status != 200 {
			t.Fatalf("HTTP %d %s", r.status, r.body)
		}
	})
	t.Run("1004 source IP not allowed", func(t *testing.T) {
		kk := env.keyFor(t, env.acct.ID, accounts.NewKey{Scopes: scopes.All(), IPAllowlist: mustPrefixes(t, "203.0.113.0/24")})
		e := wantError(t, env.signed(t, kk, "GET", "/v1/account", ""), 401, 1004, "ip_not_allowed", nil)
		if e["details"].(map[string]any)["source_ip"] != "127.0.0.1" {
			t.Errorf("details %v", e["details"])
		}
		ok := env.keyFor(t, env.acct.ID, accounts.NewKey{Scopes: scopes.All(), IPAllowlist: mustPrefixes(t, "203.0.113.0/24", "127.0.0.1/32")})
		if r := env.signed(t, ok, "GET", "/v1/account", ""); r.status != 200 {
			t.Fatalf("allowlisted address refused: %s", r.body)
		}
	})
	t.Run("1005 scope missing", func(t *testing.T) {
		kk := env.key(t, scopes.OrdersRead)
		e := wantError(t, env.signed(t, kk, "GET", "/v1/account", ""), 403, 1005, "insufficient_scope", nil)
		if e["details"].(map[string]any)["required_scope"] != "account.read" {
			t.Errorf("details %v", e["details"])
		}
		// A scoped-out endpoint that is not built yet still refuses first.
		wantError(t, env.signed(t, kk, "POST", "/v1/orders", `{}`), 403, 1005, "insufficient_scope", nil)
	})
	t.Run("1006 revoked", func(t *testing.T) {
		kk := env.key(t)
		if err := env.store.RevokeKey(context.Background(), env.acct.ID, kk.ID, "test"); err != nil {
			t.Fatal(err)
		}
		wantError(t, env.signed(t, kk, "GET", "/v1/account", ""), 401, 1006, "key_revoked", nil)
	})
	t.Run("1006 expired", func(t *testing.T) {
		// The API refuses a past expires_at; the store takes it, which makes an expired key.
		exp := time.Now().Add(-time.Second)
		kk := env.keyFor(t, env.acct.ID, accounts.NewKey{Scopes: scopes.All(), ExpiresAt: &exp})
		wantError(t, env.signed(t, kk, "GET", "/v1/account", ""), 401, 1006, "key_revoked", nil)
	})
	t.Run("1007 inactive", func(t *testing.T) {
		kk := env.key(t)
		off := false
		if _, err := env.store.UpdateKey(context.Background(), env.acct.ID, kk.ID, accounts.KeyUpdate{IsActive: &off}, "test"); err != nil {
			t.Fatal(err)
		}
		wantError(t, env.signed(t, kk, "GET", "/v1/account", ""), 401, 1007, "key_inactive", nil)
	})
	t.Run("1009 replayed", func(t *testing.T) {
		hh := reqsign.Headers(k.ID, k.Secret, time.Now(), "GET", "/v1/account", nil)
		args := []string{reqsign.HeaderKey, k.ID, reqsign.HeaderTimestamp, hh[reqsign.HeaderTimestamp], reqsign.HeaderSign, hh[reqsign.HeaderSign]}
		if r := env.ts.do(t, "GET", "/v1/account", "", "", args...); r.status != 200 {
			t.Fatalf("first use: HTTP %d %s", r.status, r.body)
		}
		wantError(t, env.ts.do(t, "GET", "/v1/account", "", "", args...), 401, 1009, "replayed_signature", nil)
	})
}

// A suspended account reads but does not write (1008).
func TestSuspendedAccountReadsOnly(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	k := env.key(t)
	victim := env.key(t)
	if err := env.store.SetStatus(context.Background(), env.acct.ID, accounts.StatusSuspended); err != nil {
		t.Fatal(err)
	}
	r := env.signed(t, k, "GET", "/v1/account", "")
	if r.status != 200 || r.json["status"] != "suspended" {
		t.Fatalf("read refused: HTTP %d %s", r.status, r.body)
	}
	wantError(t, env.signed(t, k, "POST", "/v1/api-keys", `{"scopes":["orders.read"]}`), 403, 1008, "account_suspended", nil)
	wantError(t, env.signed(t, k, "POST", "/v1/orders", `{}`), 403, 1008, "account_suspended", nil)
	// Revoking a key stays possible on a frozen account.
	if r := env.signed(t, k, "DELETE", "/v1/api-keys/"+victim.ID, ""); r.status != 204 {
		t.Fatalf("revoke on a suspended account: HTTP %d %s", r.status, r.body)
	}
}

// Bootstrap tokens work on their endpoints and are 1011 elsewhere.
func TestBootstrapTokenScope(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	bearer := "Bearer abt_" + env.acct.ID
	r := env.ts.do(t, "GET", "/v1/account", "", "", "Authorization", bearer)
	if r.status != 200 || r.json["id"] != env.acct.ID {
		t.Fatalf("GET /v1/account with bootstrap: HTTP %d %s", r.status, r.body)
	}
	for _, ep := range []string{"GET /v1/orders", "GET /v1/balance", "GET /v1/api-keys", "POST /v1/webhooks"} {
		m, p, _ := strings.Cut(ep, " ")
		body := "{}"
		if m == "GET" {
			body = "" // a GET with a body is refused before authentication
		}
		wantError(t, env.ts.do(t, m, p, "application/json", body, "Authorization", bearer), 401, 1011, "bootstrap_token_expired", nil)
	}
	wantError(t, env.ts.do(t, "GET", "/v1/account", "", "", "Authorization", "Bearer abt_expired"), 401, 1011, "bootstrap_token_expired", nil)
	// A key where only a session is accepted is refused with the session's code.
	k := env.key(t)
	wantError(t, env.signed(t, k, "POST", "/v1/session/revoke-all", ""), 401, 1013, "session_expired", nil)
}

// 50 concurrent copies of one signed request: exactly one is served, 49 are replays.
func TestConcurrentIdenticalSignedRequests(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	k := env.key(t)
	h := reqsign.Headers(k.ID, k.Secret, time.Now(), "GET", "/v1/account", nil)
	var wg sync.WaitGroup
	codes := make([]int, 50)
	start := make(chan struct{})
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", env.ts.url+"/v1/account", nil)
			for name, v := range h {
				req.Header.Set(name, v)
			}
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code int } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			codes[i] = resp.StatusCode
			if resp.StatusCode == 401 {
				codes[i] = body.Error.Code
				if resp.Header.Get("RateLimit-Limit") == "" {
					t.Error("replay answer without rate-limit headers")
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	ok, replayed := 0, 0
	for _, c := range codes {
		switch c {
		case 200:
			ok++
		case 1009:
			replayed++
		}
	}
	if ok != 1 || replayed != 49 {
		t.Fatalf("%d served, %d refused (codes %v); want 1 and 49", ok, replayed, codes)
	}
	// And a later copy too.
	wantError(t, env.ts.do(t, "GET", "/v1/account", "", "", reqsign.HeaderKey, k.ID,
		reqsign.HeaderTimestamp, h[reqsign.HeaderTimestamp], reqsign.HeaderSign, h[reqsign.HeaderSign]), 401, 1009, "replayed_signature", nil)
}

// The replay check shares the key budget's Redis round trip without changing either: a
// replayed signature is 1009 and charged nothing, and it is 1009 even where the key lacks
// the endpoint's scope (the check every signed request passes first).
func TestReplayIsNotChargedToTheKeyBudget(t *testing.T) {
	limits := roomyLimits
	limits.Management = 5 // GET /v1/account's class
	env := newAuthEnv(t, authEnvOptions{limits: limits})
	k := env.key(t)
	at := signNow()
	first := env.signedAt(t, k, at, "GET", "/v1/account", "")
	if first.status != 200 || first.header.Get(HeaderRateRemaining) != "4" {
		t.Fatalf("first use: HTTP %d, remaining %q", first.status, first.header.Get(HeaderRateRemaining))
	}
	for range 3 {
		wantError(t, env.signedAt(t, k, at, "GET", "/v1/account", ""), 401, 1009, "replayed_signature", nil)
	}
	if r := env.signed(t, k, "GET", "/v1/account", ""); r.status != 200 || r.header.Get(HeaderRateRemaining) != "3" {
		t.Fatalf("after three replays: HTTP %d, remaining %q, want 3 (replays charged)", r.status, r.header.Get(HeaderRateRemaining))
	}

	reader := env.key(t, "orders.read")
	at = signNow()
	wantErrorResp(t, env.signedAt(t, reader, at, "POST", "/v1/api-keys", `{"scopes":["orders.read"]}`), 403, 1005)
	wantError(t, env.signedAt(t, reader, at, "POST", "/v1/api-keys", `{"scopes":["orders.read"]}`), 401, 1009, "replayed_signature", nil)
}

// RateLimit-* headers are on every response: public, signed, errors, unknown routes.
func TestRateLimitHeadersOnEveryResponse(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{limits: RateLimits{IP: redis_rate.Limit{Rate: 1000, Burst: 1000, Period: time.Second}}})
	k := env.key(t)
	cases := map[string]response{
		"public":        env.ts.do(t, "GET", "/v1/status", "", ""),
		"signed":        env.signed(t, k, "GET", "/v1/account", ""),
		"auth error":    env.ts.do(t, "GET", "/v1/account", "", ""),
		"unknown route": env.ts.do(t, "GET", "/v1/nope", "", ""),
		"wrong method":  env.ts.do(t, "PUT", "/v1/account", "", ""),
		"not built":     env.signed(t, k, "GET", "/v1/orders", ""),
	}
	for name, r := range cases {
		lim, rem, reset := r.header.Get("RateLimit-Limit"), r.header.Get("RateLimit-Remaining"), r.header.Get("RateLimit-Reset")
		l, err1 := strconv.Atoi(lim)
		n, err2 := strconv.Atoi(rem)
		_, err3 := strconv.Atoi(reset)
		if err1 != nil || err2 != nil || err3 != nil || n > l || l <= 0 {
			t.Errorf("%s (HTTP %d): RateLimit-Limit %q Remaining %q Reset %q", name, r.status, lim, rem, reset)
		}
	}
	// A signed management call shows the tighter per-key budget (5), not the IP's 1000.
	if got := cases["signed"].header.Get("RateLimit-Limit"); got != "5" {
		t.Errorf("signed GET /v1/account: RateLimit-Limit %s, want 5", got)
	}
}

// The 31st order-class request within one second is refused with 1100 and Retry-After;
// POST /v1/orders is not built yet (9002) but passes authentication and limits first.
func TestOrderClassRateLimit(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{limits: RateLimits{IP: redis_rate.Limit{Rate: 1000, Burst: 1000, Period: time.Second}}})
	// A slow machine may spread 31 requests over more than a second, which the window
	// rightly allows; then the attempt says nothing and is repeated with a fresh key.
	for attempt := 0; attempt < 3; attempt++ {
		k := env.key(t, scopes.OrdersWrite, scopes.OrdersRead)
		start := time.Now()
		for i := 1; i <= 30; i++ {
			r := env.signed(t, k, "POST", "/v1/orders", fmt.Sprintf(`{"n":%d}`, i))
			wantError(t, r, 501, 9002, "not_implemented", nil)
			if got := r.header.Get("RateLimit-Remaining"); got != strconv.Itoa(30-i) {
				t.Fatalf("request %d: RateLimit-Remaining %s, want %d", i, got, 30-i)
			}
		}
		r := env.signed(t, k, "POST", "/v1/orders", `{"n":31}`)
		if time.Since(start) >= time.Second {
			continue
		}
		wantError(t, r, 429, 1100, "rate_limited", nil)
		if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 1 {
			t.Errorf("Retry-After %q, want 1", r.header.Get("Retry-After"))
		}
		if r.header.Get("RateLimit-Remaining") != "0" || r.header.Get("RateLimit-Limit") != "30" {
			t.Errorf("headers %v", r.header)
		}
		// Reads have their own budget: the key is not blocked for them.
		wantError(t, env.signed(t, k, "GET", "/v1/orders", ""), 501, 9002, "not_implemented", nil)
		return
	}
	t.Fatal("could not send 31 requests within one second in 3 attempts")
}

// The per-IP budget applies to anonymous calls too.
func TestPerIPBudget(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{limits: RateLimits{IP: redis_rate.Limit{Rate: 3, Burst: 3, Period: time.Minute}}})
	for i := 0; i < 3; i++ {
		if r := env.ts.do(t, "GET", "/v1/status", "", ""); r.status != 200 {
			t.Fatalf("call %d: HTTP %d", i, r.status)
		}
	}
	r := wantErrorResp(t, env.ts.do(t, "GET", "/v1/status", "", ""), 429, 1100)
	if ra, _ := strconv.Atoi(r.header.Get("Retry-After")); ra < 1 {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
}

func wantErrorResp(t *testing.T, r response, status int, code float64) response {
	t.Helper()
	e := envelopeOf(t, r)
	if r.status != status || e["code"] != code {
		t.Fatalf("HTTP %d code %v, want %d %v: %s", r.status, e["code"], status, code, r.body)
	}
	return r
}

// Daily quota: 1102 with details.resets_at at the next UTC midnight.
func TestDailyQuota(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{limits: RateLimits{Order: 100, Read: 100, Management: 100,
		IP: redis_rate.Limit{Rate: 1000, Burst: 1000, Period: time.Second}, Quota: quotaOf(2, 0)}})
	k := env.key(t)
	for i := 0; i < 2; i++ {
		if r := env.signed(t, k, "GET", "/v1/account", ""); r.status != 200 {
			t.Fatalf("call %d: %s", i, r.body)
		}
	}
	r := env.signed(t, k, "GET", "/v1/account", "")
	e := wantError(t, r, 429, 1102, "quota_exceeded", nil)
	now := time.Now().UTC()
	want := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Format("2006-01-02T15:04:05.000Z")
	if e["details"].(map[string]any)["resets_at"] != want {
		t.Errorf("details %v, want resets_at %s", e["details"], want)
	}
}

// A revoked key stops working on another replica within the key cache bound.
func TestRevokedKeyStopsWithinSeconds(t *testing.T) {
	a := newAuthEnv(t, authEnvOptions{cacheTTL: time.Second})
	b := newAuthEnv(t, authEnvOptions{cacheTTL: time.Second, shareWith: a})
	admin := a.key(t, scopes.APIKeysWrite)
	victim := a.key(t)
	if r := b.signed(t, victim, "GET", "/v1/account", ""); r.status != 200 { // warms b's cache
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	if r := a.signed(t, admin, "DELETE", "/v1/api-keys/"+victim.ID, ""); r.status != 204 {
		t.Fatalf("revoke: HTTP %d %s", r.status, r.body)
	}
	revokedAt := time.Now()
	// The replica that revoked forgets at once.
	wantError(t, a.signed(t, victim, "GET", "/v1/account", ""), 401, 1006, "key_revoked", nil)
	for {
		r := b.signed(t, victim, "GET", "/v1/account", "")
		if r.status == 401 {
			wantError(t, r, 401, 1006, "key_revoked", nil)
			break
		}
		if time.Since(revokedAt) > 3*time.Second {
			t.Fatalf("revoked key still served by the other replica after %s", time.Since(revokedAt))
		}
		time.Sleep(50 * time.Millisecond) // polling the other replica's answer
	}
	t.Logf("other replica refused the revoked key after %s", time.Since(revokedAt).Round(time.Millisecond))
}

func mustPrefixes(t *testing.T, ss ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func quotaOf(daily, monthly int64) ratelimit.Quota {
	return ratelimit.Quota{Daily: daily, Monthly: monthly}
}
