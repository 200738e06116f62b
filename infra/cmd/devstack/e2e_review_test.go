package main_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"rental/infra/client"
)

// TestE2EReviewHoles repeats three findings of the security review (issue 38) against the
// whole dev stack, public interfaces only: a quote prices one order (a second order with it
// is 409 3023); a key with api_keys.write cannot mint a key wider than itself (1015, 1005)
// nor reactivate a wider one; a plan upgrade pays the larger reserve for the rest of the
// billing day at once (basic 6 TRX, then 234 TRX for 5.24m), and a downgrade refunds nothing.
func TestE2EReviewHoles(t *testing.T) {
	e := e2eStack(t)
	c := e.c
	e.scopes = []string{"quotes.read", "quotes.write", "subscriptions.read", "subscriptions.write", "api_keys.read", "api_keys.write"}
	e.signup()
	e.deposit(400_000_000)
	recv := e.newReceiver()
	eventually(t, 15*time.Second, "GET /v1/prices answers 200", func() bool { return c.api("GET", "/v1/prices", nil).status == 200 })
	errorOf := func(r reply) (code int, field any) {
		var env struct {
			Error struct {
				Code  int `json:"code"`
				Field any `json:"field"`
			} `json:"error"`
		}
		r.decode(t, &env)
		return env.Error.Code, env.Error.Field
	}
	wantCode := func(r reply, status, code int, field any, what string) {
		t.Helper()
		if got, f := errorOf(c.want(r, status, what)); got != code || f != field {
			t.Fatalf("%s: code %d field %v, want %d %v: %s", what, got, f, code, field, r.body)
		}
	}

	// Item 2: one quote, one order.
	var q struct{ ID string }
	c.want(c.signed("POST", "/v1/quotes", map[string]any{"resource": "energy", "tier": "1h", "amount": 65_000}), 201, "POST /v1/quotes").decode(t, &q)
	c.want(c.signed("POST", "/v1/orders", map[string]any{"client_order_id": "rv-q-1", "quote_id": q.ID, "receiver": recv}), 201, "the quote's order")
	wantCode(c.signed("POST", "/v1/orders", map[string]any{"client_order_id": "rv-q-2", "quote_id": q.ID, "receiver": recv}),
		409, 3023, "quote_id", "a second order with the quote")

	// Item 6: a key never wider than its creator.
	expires := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Millisecond)
	narrowScopes := []string{"api_keys.write", "api_keys.read", "account.read"}
	var p struct{ ID, Secret string }
	c.want(c.signed("POST", "/v1/api-keys", map[string]any{"scopes": narrowScopes, "expires_at": expires.Format(time.RFC3339Nano),
		"ip_allowlist": []string{"127.0.0.1"}}), 201, "a restricted key").decode(t, &p)
	pc := client.New("http://"+c.s.api, p.ID, p.Secret, client.WithHTTPClient(c.http))
	viaP := func(method, target string, body any) reply {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := pc.Do(t.Context(), method, target, b)
		if resp == nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		return reply{status: resp.Status, header: resp.Header, body: resp.Body}
	}
	wantCode(viaP("POST", "/v1/api-keys", map[string]any{"scopes": narrowScopes}), 403, 1015, "expires_at", "same scopes, no expiry, no allowlist")
	wantCode(viaP("POST", "/v1/api-keys", map[string]any{"scopes": narrowScopes, "expires_at": expires.Format(time.RFC3339Nano)}),
		403, 1015, "ip_allowlist", "no allowlist")
	wantCode(viaP("POST", "/v1/api-keys", map[string]any{"scopes": []string{"orders.write"}, "expires_at": expires.Format(time.RFC3339Nano),
		"ip_allowlist": []string{"127.0.0.1"}}), 403, 1005, "scopes", "a scope the creator lacks")
	var wide struct{ ID string }
	c.want(c.signed("POST", "/v1/api-keys", map[string]any{"scopes": []string{"orders.write", "account.read"}}), 201, "a wide key").decode(t, &wide)
	c.want(c.signed("PATCH", "/v1/api-keys/"+wide.ID, map[string]any{"is_active": false}), 200, "deactivate the wide key")
	wantCode(viaP("PATCH", "/v1/api-keys/"+wide.ID, map[string]any{"is_active": true}), 403, 1005, "is_active", "reactivate a wider key")
	c.want(viaP("POST", "/v1/api-keys", map[string]any{"scopes": []string{"account.read"}, "expires_at": expires.Format(time.RFC3339Nano),
		"ip_allowlist": []string{"127.0.0.1"}}), 201, "a key within its creator")

	// Item 1: an upgrade is paid at once for the rest of the day.
	var sub struct{ ID string }
	c.want(c.signed("POST", "/v1/subscriptions", map[string]any{"address": e.newReceiver(), "preset": "basic"}), 201, "basic plan").decode(t, &sub)
	path := "/v1/subscriptions/" + sub.ID
	c.want(c.signed("PATCH", path, map[string]any{"preset": "5.24m"}), 200, "upgrade to 5.24m")
	c.want(c.signed("PATCH", path, map[string]any{"preset": "basic"}), 200, "downgrade to basic")
	c.want(c.signed("PATCH", path, map[string]any{"preset": "5.24m"}), 200, "upgrade again the same day")
	var got struct {
		Events []struct {
			Kind      string `json:"kind"`
			AmountSun *int64 `json:"amount_sun"`
		} `json:"events"`
	}
	c.want(c.signed("GET", path, nil), 200, "GET the plan").decode(t, &got)
	var charges []int64
	for _, ev := range got.Events {
		if ev.Kind == "charge" {
			charges = append(charges, *ev.AmountSun)
		}
	}
	if fmt.Sprint(charges) != "[234000000 6000000]" { // newest first
		t.Fatalf("charges %v, want the basic day (6 TRX) and the upgrade's rest of the day (234 TRX) only", charges)
	}
}
