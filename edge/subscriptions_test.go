package edge

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rental/infra/acceptance"
	"rental/infra/accounts"
	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/tron"
	"rental/processors/subscriptions"
	"rental/schemas/network"
	"rental/schemas/scopes"
)

// The subscription tests run the real edge (keys, Postgres, Redis) with the pricing module
// on the test snapshot of pricing_test.go (1 h energy at 60.00 SUN in the "day" part at
// testT0) and the real ledgerstore.

type subsEnv struct {
	*pricingEnv
	ledger    *ledgerstore.Ledger
	accept    *acceptance.Orders // order acceptance on the same database (the watcher's Placer)
	available atomic.Bool
}

func newSubsEnv(t *testing.T) *subsEnv {
	t.Helper()
	oe := newOrdersEnv(t, nil) // pricing, sim, ledger on one database
	se := &subsEnv{pricingEnv: oe.pricingEnv, ledger: oe.ledger, accept: oe.accept}
	se.available.Store(true)
	idem := idempotency.New(oe.db.Pool, idempotency.Options{})
	// A second edge on the same database and Redis, with the subscription module.
	se.authEnv = newAuthEnv(t, authEnvOptions{shareWith: oe.authEnv, extra: func(o *Options) {
		prices, err := acceptance.NewPrices(acceptance.PricesOptions{Network: network.Nile, Snapshots: se.snaps, Chain: tron.NewClient("http://127.0.0.1:1"), Now: se.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		pm, err := NewPricing(PricingOptions{Prices: prices})
		if err != nil {
			t.Fatal(err)
		}
		sm, err := NewSubscriptions(SubscriptionsOptions{Network: network.Nile, Ledger: oe.ledger, Idempotency: idem, Prices: prices,
			Available: se.available.Load, Now: se.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		o.Modules = append(o.Modules, pm, sm)
	}})
	t.Cleanup(func() { (&ordersEnv{pricingEnv: se.pricingEnv}).checkInvariants(t) })
	return se
}

func (se *subsEnv) fund(t *testing.T, accountID string, sun int64) {
	t.Helper()
	(&ordersEnv{pricingEnv: se.pricingEnv, ledger: se.ledger}).fund(t, accountID, sun)
}

func (se *subsEnv) available_(t *testing.T, accountID string) int64 {
	t.Helper()
	s, err := se.ledger.Summary(context.Background(), accountID)
	if err != nil {
		t.Fatal(err)
	}
	return s.AvailableSun
}

func (se *subsEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := se.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// outboxEvents returns the data of every subscription event of type typ, oldest first.
func (se *subsEnv) outboxEvents(t *testing.T, typ string) []map[string]any {
	t.Helper()
	rows, err := se.db.Pool.Query(context.Background(), `SELECT value FROM outbox WHERE topic = 'events.subscriptions.v1'
		AND headers->>'event' = $1 ORDER BY id`, typ)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var v []byte
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		var env map[string]any
		if err := json.Unmarshal(v, &env); err != nil {
			t.Fatal(err)
		}
		if env["event_version"] != 1.0 {
			t.Errorf("event_version %v", env["event_version"])
		}
		out = append(out, env["data"].(map[string]any))
	}
	return out
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

// sameJSON compares two values by their JSON (maps have sorted keys).
func sameJSON(a, b any) bool { return js(a) == js(b) }

func TestSubscriptionPlansArePublicAndPriced(t *testing.T) {
	se := newSubsEnv(t)
	r := se.get(t, "/v1/subscriptions/plans")
	if r.status != 200 {
		t.Fatalf("plans without credentials: %d %s", r.status, r.body)
	}
	if r.json["available"] != true {
		t.Errorf("available %v", r.json["available"])
	}
	// 1 h energy at 60.00 SUN in the day part: one use of 65,000 = 3,900,000 SUN.
	pu := r.json["per_use"].(map[string]any)
	if pu["mode"] != "grid" || pu["energy_per_use"] != 65_000.0 || pu["price_sun"] != 3_900_000.0 || pu["price_trx"] != 3.9 || pu["day_part"] != "day" {
		t.Errorf("per_use %v", pu)
	}
	if !sameJSON(r.json["limits"], map[string]any{"reserve_min": 131_000.0, "reserve_max": 5_240_000.0, "step": 1_000.0, "low_min": 65_000.0, "gap_min": 65_000.0}) {
		t.Errorf("limits %v", r.json["limits"])
	}
	if !sameJSON(r.json["fee_rule"], map[string]any{"trx_per_unit": 6.0, "unit_energy": 131_000.0, "rounding": "ceil_whole_trx"}) {
		t.Errorf("fee_rule %v", r.json["fee_rule"])
	}
	data := r.json["data"].([]any)
	wantFees := map[string]float64{"basic": 6, "1.3m": 60, "2.62m": 120, "5.24m": 240}
	wantReserve := map[string]float64{"basic": 131_000, "1.3m": 1_300_000, "2.62m": 2_620_000, "5.24m": 5_240_000}
	if len(data) != 4 {
		t.Fatalf("%d plans", len(data))
	}
	for _, d := range data {
		p := d.(map[string]any)
		slug := p["slug"].(string)
		if p["fee_trx_per_day"] != wantFees[slug] || p["fee_sun_per_day"] != wantFees[slug]*1e6 || p["reserve"] != wantReserve[slug] {
			t.Errorf("plan %s: %v", slug, p)
		}
		avg := p["average_price"].([]any)
		if len(avg) != 4 {
			t.Fatalf("plan %s: average_price %v", slug, avg)
		}
		for i, uses := range []float64{10, 50, 200, 1000} {
			a := avg[i].(map[string]any)
			want := float64(int64(wantFees[slug]*1e6+uses-1)/int64(uses)) + 3_900_000
			if a["uses_per_day"] != uses || a["average_sun"] != want {
				t.Errorf("plan %s, %v uses: %v, want average_sun %v", slug, uses, a, want)
			}
		}
	}
	basic := data[0].(map[string]any)
	if basic["slug"] != "basic" || basic["low"] != 131_000.0 || basic["high"] != 131_000.0 || basic["uses_within_reserve_per_day"] != 48.0 {
		t.Errorf("basic %v", basic)
	}
	// 10 uses a day is within the basic reserve (48), 50 is not.
	if a := basic["average_price"].([]any); a[0].(map[string]any)["within_reserve"] != true || a[1].(map[string]any)["within_reserve"] != false {
		t.Errorf("within_reserve %v", a)
	}

	// A presented key is verified: a valid one is answered, a wrong signature is 1002.
	k := se.key(t, scopes.OrdersRead)
	if r := se.signed(t, k, "GET", "/v1/subscriptions/plans", ""); r.status != 200 {
		t.Errorf("with a key: %d %s", r.status, r.body)
	}
	bad := k
	bad.Secret = k.Secret[:len(k.Secret)-1] + "x"
	wantError(t, se.signed(t, bad, "GET", "/v1/subscriptions/plans", ""), 401, 1002, "invalid_signature", nil)

	// 1 h energy not priced (snapshot stale): price null, averages null; switched off.
	se.clock.add(time.Hour)
	se.available.Store(false)
	r = se.get(t, "/v1/subscriptions/plans")
	if r.status != 200 || r.json["available"] != false || r.json["per_use"].(map[string]any)["price_sun"] != nil {
		t.Fatalf("stale: %d %s", r.status, r.body)
	}
	if a := r.json["data"].([]any)[0].(map[string]any)["average_price"].([]any)[0].(map[string]any); a["average_sun"] != nil || a["average_trx"] != nil {
		t.Errorf("average without a price: %v", a)
	}
}

func TestSubscriptionPlanCreateChargesTheFirstDay(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite, scopes.SubscriptionsRead)
	se.fund(t, se.acct.ID, 10_000_000)
	addr := randomAddress(t).String()

	r := se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": addr, "preset": "basic"}))
	checkFields(t, r, 201, map[string]any{
		"receiver": addr, "address": addr, "resource": "energy", "mode": "refill", "tier": "1h", "preset": "basic",
		"reserve": 131_000.0, "low": 131_000.0, "high": 131_000.0, "daily_fee_sun": 6_000_000.0, "fee_trx_per_day": 6.0,
		"status": "active", "delegated_energy": 0.0, "refills_today": 0.0, "last_order_id": nil, "last_refill_at": nil,
		"grace_until": nil, "label": nil, "max_price_sun": nil, "max_refills_per_day": nil,
		"created_at": "2025-03-01T12:00:01.000Z", "next_billing_at": "2025-03-02T12:00:01.000Z",
	})
	if _, ok := r.json["events"]; ok {
		t.Errorf("events[] on create: %s", r.body)
	}
	id := r.json["id"].(string)
	if got := se.available_(t, se.acct.ID); got != 4_000_000 {
		t.Fatalf("available after the first day's fee: %d", got)
	}
	ch := se.outboxEvents(t, "subscription.charged")
	if len(ch) != 1 || !sameJSON(ch[0], map[string]any{"subscription_id": id, "receiver": addr, "plan": "basic",
		"amount_sun": 6_000_000.0, "next_billing_at": "2025-03-02T12:00:01.000Z"}) {
		t.Fatalf("subscription.charged %v", ch)
	}
	g := se.signed(t, k, "GET", "/v1/subscriptions/"+id, "")
	evs, _ := g.json["events"].([]any)
	if g.status != 200 || len(evs) != 1 {
		t.Fatalf("GET: %d %s", g.status, g.body)
	}
	if e := evs[0].(map[string]any); e["kind"] != "charge" || e["amount_sun"] != 6_000_000.0 || e["energy_delta"] != nil || e["txid"] != nil {
		t.Errorf("charge event %v", e)
	}

	// One subscription per address and resource: 3011 naming the live one, nothing charged.
	e := wantError(t, se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": addr, "reserve": 1_300_000, "low": 65_000, "high": 130_000})),
		409, 3011, "subscription_exists", "address")
	checkDetails(t, "3011", e, map[string]any{"subscription_id": id})
	// The legacy form on the same address and resource is the same subscription slot.
	wantError(t, se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"receiver": addr, "resource": "energy", "mode": "refill",
		"tier": "1h", "threshold_amount": 10_000, "refill_amount": 65_000})), 409, 3011, "subscription_exists", "receiver")
	if got := se.available_(t, se.acct.ID); got != 4_000_000 {
		t.Fatalf("available after refusals: %d", got)
	}

	// The fee cannot be paid: 4001 with required_sun and available_sun, nothing stored.
	e = wantError(t, se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": randomAddress(t).String(), "preset": "1.3m"})),
		402, 4001, "insufficient_funds", nil)
	checkDetails(t, "4001", e, map[string]any{"required_sun": 60_000_000.0, "available_sun": 4_000_000.0})
	if n := se.count(t, `SELECT count(*) FROM subscriptions`); n != 1 {
		t.Fatalf("%d subscriptions after the refused one", n)
	}
	if n := len(se.outboxEvents(t, "subscription.charged")); n != 1 {
		t.Fatalf("%d charged events", n)
	}
}

func TestSubscriptionValidation(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite)
	se.fund(t, se.acct.ID, 1_000_000_000)
	addr := randomAddress(t).String()
	post := func(body map[string]any) response { return se.signed(t, k, "POST", "/v1/subscriptions", js(body)) }

	// Every violation is listed at once.
	e := wantError(t, post(map[string]any{"address": addr, "reserve": 100_500, "low": 1_500, "high": 200_000}), 422, 3020, "subscription_rule_invalid", nil)
	var rules []string
	for _, v := range e["details"].(map[string]any)["violations"].([]any) {
		rules = append(rules, v.(map[string]any)["field"].(string)+":"+v.(map[string]any)["rule"].(string))
	}
	sort.Strings(rules)
	if js(rules) != js([]string{"high:high_within_reserve", "low:low_min", "low:step", "reserve:reserve_range", "reserve:step"}) {
		t.Errorf("violations %v", rules)
	}
	e = wantError(t, post(map[string]any{"address": addr, "reserve": 1_300_000, "low": 65_000, "high": 100_000}), 422, 3020, "subscription_rule_invalid", nil)
	if v := e["details"].(map[string]any)["violations"].([]any); len(v) != 1 || v[0].(map[string]any)["rule"] != "gap_min" {
		t.Errorf("gap: %v", v)
	}
	// The basic exception and a custom rule at the limits are valid.
	for _, body := range []map[string]any{
		{"address": randomAddress(t).String(), "reserve": 131_000, "low": 131_000, "high": 131_000},
		{"address": randomAddress(t).String(), "reserve": 5_240_000, "low": 65_000, "high": 5_240_000, "label": "edge"},
	} {
		if r := post(body); r.status != 201 {
			t.Fatalf("%v: %d %s", body, r.status, r.body)
		}
	}

	cases := []struct {
		name   string
		body   map[string]any
		status int
		code   float64
		field  any
	}{
		{"unknown preset", map[string]any{"address": addr, "preset": "gold"}, 400, 2001, "preset"},
		{"preset and numbers", map[string]any{"address": addr, "preset": "basic", "reserve": 131_000}, 400, 2001, "preset"},
		{"custom without high", map[string]any{"address": addr, "reserve": 131_000, "low": 65_000}, 400, 2001, "high"},
		{"bad address", map[string]any{"address": "T123", "preset": "basic"}, 400, 2007, "address"},
		{"no address", map[string]any{"preset": "basic"}, 400, 2001, "address"},
		{"mixed forms", map[string]any{"address": addr, "preset": "basic", "tier": "1h"}, 400, 2001, "tier"},
		{"empty", map[string]any{}, 400, 2001, "address"},
		{"unknown field", map[string]any{"address": addr, "preset": "basic", "colour": "red"}, 400, 2001, "colour"},
		{"fractional reserve", map[string]any{"address": addr, "reserve": 131_000.5, "low": 65_000, "high": 131_000}, 400, 2001, "reserve"},
		{"legacy without refill_amount", map[string]any{"receiver": addr, "resource": "energy", "mode": "refill", "tier": "1h", "threshold_amount": 1}, 400, 2001, "refill_amount"},
		{"legacy bad mode", map[string]any{"receiver": addr, "resource": "energy", "mode": "top", "tier": "1h", "threshold_amount": 1, "refill_amount": 65_000}, 400, 2001, "mode"},
		{"legacy activation", map[string]any{"receiver": addr, "resource": "activation", "mode": "refill", "tier": "1h", "threshold_amount": 1, "refill_amount": 65_000}, 400, 2001, "resource"},
		{"legacy tier off", map[string]any{"receiver": addr, "resource": "energy", "mode": "refill", "tier": "1d", "threshold_amount": 1, "refill_amount": 65_000}, 422, 2003, "tier"},
		{"legacy amount range", map[string]any{"receiver": addr, "resource": "energy", "mode": "refill", "tier": "1h", "threshold_amount": 1, "refill_amount": 5}, 400, 2008, "refill_amount"},
		{"legacy negative threshold", map[string]any{"receiver": addr, "resource": "energy", "mode": "refill", "tier": "1h", "threshold_amount": -1, "refill_amount": 65_000}, 400, 2001, "threshold_amount"},
		{"legacy zero max refills", map[string]any{"receiver": addr, "resource": "energy", "mode": "refill", "tier": "1h", "threshold_amount": 1, "refill_amount": 65_000, "max_refills_per_day": 0}, 400, 2001, "max_refills_per_day"},
		{"legacy bad receiver", map[string]any{"receiver": "41a614f803b6fd780986a42c78ec9c7f77e6ded13c", "resource": "energy", "mode": "refill", "tier": "1h", "threshold_amount": 1, "refill_amount": 65_000}, 400, 2007, "receiver"},
	}
	for _, c := range cases {
		r := post(c.body)
		e := envelopeOf(t, r)
		if r.status != c.status || e["code"] != c.code || e["field"] != c.field {
			t.Errorf("%s: %d %v field %v, want %d %v %v: %s", c.name, r.status, e["code"], e["field"], c.status, c.code, c.field, r.body)
		}
	}
	wantError(t, se.signed(t, k, "POST", "/v1/subscriptions", "{"), 400, 2000, "malformed_json", nil)
	if n := se.count(t, `SELECT count(*) FROM subscriptions`); n != 2 {
		t.Fatalf("%d subscriptions stored, want the 2 valid ones", n)
	}
	// A key without subscriptions.write cannot create.
	ro := se.key(t, scopes.SubscriptionsRead)
	wantError(t, se.signed(t, ro, "POST", "/v1/subscriptions", js(map[string]any{"address": addr, "preset": "basic"})), 403, 1005, "insufficient_scope", nil)
}

func legacyBody(receiver string) map[string]any {
	return map[string]any{"receiver": receiver, "resource": "energy", "mode": "refill", "tier": "1h",
		"threshold_amount": 30_000, "refill_amount": 65_000, "max_price_sun": 10_000_000, "max_refills_per_day": 3, "label": "hot wallet"}
}

func TestSubscriptionPatchDeleteAndOtherAccounts(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite, scopes.SubscriptionsRead)
	addr := randomAddress(t).String()
	r := se.signed(t, k, "POST", "/v1/subscriptions", js(legacyBody(addr)))
	checkFields(t, r, 201, map[string]any{"receiver": addr, "resource": "energy", "mode": "refill", "tier": "1h",
		"threshold_amount": 30_000.0, "refill_amount": 65_000.0, "max_price_sun": 10_000_000.0, "max_refills_per_day": 3.0,
		"daily_fee_sun": 0.0, "status": "active", "label": "hot wallet", "refills_today": 0.0})
	for _, f := range []string{"address", "preset", "reserve", "delegated_energy", "next_billing_at", "events"} {
		if _, ok := r.json[f]; ok {
			t.Errorf("legacy record has plan field %s", f)
		}
	}
	id := r.json["id"].(string)
	path := "/v1/subscriptions/" + id
	patch := func(body string) response { return se.signed(t, k, "PATCH", path, body) }

	wantError(t, patch(`{}`), 422, 2002, "empty_patch", nil)
	wantError(t, patch(`{"status":"suspended"}`), 400, 2001, "validation_failed", "status")
	wantError(t, patch(`{"reserve":131000}`), 400, 2001, "validation_failed", "reserve")
	wantError(t, patch(`{"tier":"3d"}`), 422, 2003, "tier_unavailable", "tier")

	checkFields(t, patch(`{"status":"paused"}`), 200, map[string]any{"status": "paused", "status_reason": "user"})
	if p := se.outboxEvents(t, "subscription.paused"); len(p) != 1 || !sameJSON(p[0], map[string]any{"subscription_id": id, "receiver": addr, "reason": "user"}) {
		t.Fatalf("subscription.paused %v", p)
	}
	checkFields(t, patch(`{"status":"paused"}`), 200, map[string]any{"status": "paused"}) // no second event
	checkFields(t, patch(`{"status":"active","max_price_sun":null,"refill_amount":100000,"label":null}`), 200,
		map[string]any{"status": "active", "status_reason": nil, "max_price_sun": nil, "refill_amount": 100_000.0, "label": nil})
	if n := len(se.outboxEvents(t, "subscription.paused")); n != 1 {
		t.Fatalf("%d paused events", n)
	}

	// Another account sees nothing: 404 for GET, PATCH and DELETE, its list is empty.
	other := se.keyFor(t, se.newAccount(t).ID, accounts.NewKey{})
	wantError(t, se.signed(t, other, "GET", path, ""), 404, 3022, "object_not_found", "subscriptionId")
	wantError(t, se.signed(t, other, "PATCH", path, `{"status":"paused"}`), 404, 3022, "object_not_found", "subscriptionId")
	wantError(t, se.signed(t, other, "DELETE", path, ""), 404, 3022, "object_not_found", "subscriptionId")
	if l := se.signed(t, other, "GET", "/v1/subscriptions", ""); l.status != 200 || len(l.json["data"].([]any)) != 0 {
		t.Fatalf("other list: %s", l.body)
	}
	wantError(t, se.signed(t, k, "GET", "/v1/subscriptions/sub_000000000000000000000000", ""), 404, 3022, "object_not_found", "subscriptionId")

	// DELETE cancels: 204, terminal, readable; a change is 3012; a second DELETE is 204.
	if d := se.signed(t, k, "DELETE", path, ""); d.status != 204 || len(d.body) != 0 {
		t.Fatalf("DELETE: %d %s", d.status, d.body)
	}
	checkFields(t, se.signed(t, k, "GET", path, ""), 200, map[string]any{"status": "cancelled", "id": id})
	wantError(t, patch(`{"status":"active"}`), 409, 3012, "subscription_not_active", nil)
	wantError(t, patch(`{"label":"x"}`), 409, 3012, "subscription_not_active", nil)
	if d := se.signed(t, k, "DELETE", path, ""); d.status != 204 {
		t.Fatalf("second DELETE: %d %s", d.status, d.body)
	}
	// The address is free again for a new subscription.
	if r := se.signed(t, k, "POST", "/v1/subscriptions", js(legacyBody(addr))); r.status != 201 || r.json["id"] == id {
		t.Fatalf("after cancel: %d %s", r.status, r.body)
	}
}

func TestSubscriptionsUnavailable(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite, scopes.SubscriptionsRead)
	se.fund(t, se.acct.ID, 100_000_000)
	r := se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": randomAddress(t).String(), "preset": "basic"}))
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	path := "/v1/subscriptions/" + r.json["id"].(string)
	se.available.Store(false)
	before := se.available_(t, se.acct.ID)

	wantError(t, se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": randomAddress(t).String(), "preset": "basic"})),
		409, 3021, "subscriptions_unavailable", nil)
	wantError(t, se.signed(t, k, "POST", "/v1/subscriptions", js(legacyBody(randomAddress(t).String()))), 409, 3021, "subscriptions_unavailable", nil)
	wantError(t, se.signed(t, k, "PATCH", path, `{"preset":"1.3m"}`), 409, 3021, "subscriptions_unavailable", nil)
	wantError(t, se.signed(t, k, "PATCH", path, `{"high":131000,"label":"x"}`), 409, 3021, "subscriptions_unavailable", nil)
	// Status and label changes, reads and DELETE still work.
	checkFields(t, se.signed(t, k, "PATCH", path, `{"status":"paused","label":"off"}`), 200, map[string]any{"status": "paused", "label": "off"})
	checkFields(t, se.signed(t, k, "PATCH", path, `{"status":"active"}`), 200, map[string]any{"status": "active"})
	checkFields(t, se.signed(t, k, "GET", path, ""), 200, map[string]any{"status": "active", "label": "off", "preset": "basic"})
	if l := se.signed(t, k, "GET", "/v1/subscriptions", ""); l.status != 200 || len(l.json["data"].([]any)) != 1 {
		t.Fatalf("list: %d %s", l.status, l.body)
	}
	if d := se.signed(t, k, "DELETE", path, ""); d.status != 204 {
		t.Fatalf("DELETE: %d %s", d.status, d.body)
	}
	if n := se.count(t, `SELECT count(*) FROM subscriptions`); n != 1 || se.available_(t, se.acct.ID) != before {
		t.Fatalf("%d subscriptions, available %d (was %d)", n, se.available_(t, se.acct.ID), before)
	}
	// Switched on again, a rule change goes through and is validated.
	se.available.Store(true)
	r = se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": randomAddress(t).String(), "preset": "basic"}))
	path = "/v1/subscriptions/" + r.json["id"].(string)
	wantError(t, se.signed(t, k, "PATCH", path, `{"low":100000}`), 422, 3020, "subscription_rule_invalid", nil)
	checkFields(t, se.signed(t, k, "PATCH", path, `{"preset":"1.3m"}`), 200, map[string]any{"preset": "1.3m", "reserve": 1_300_000.0,
		"daily_fee_sun": 60_000_000.0, "fee_trx_per_day": 60.0, "next_billing_at": "2025-03-02T12:00:01.000Z"})
	checkFields(t, se.signed(t, k, "PATCH", path, `{"high":400000}`), 200, map[string]any{"preset": nil, "reserve": 1_300_000.0, "low": 130_000.0, "high": 400_000.0})
}

func TestSubscriptionListPagination(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite, scopes.SubscriptionsRead)
	ids := map[string]bool{}
	var firstReceiver string
	for i := range 5 {
		recv := randomAddress(t).String()
		if i == 0 {
			firstReceiver = recv
		}
		r := se.signed(t, k, "POST", "/v1/subscriptions", js(legacyBody(recv)))
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		ids[r.json["id"].(string)] = true
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	var last string
	for {
		q := "/v1/subscriptions?limit=2"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := se.signed(t, k, "GET", q, "")
		if r.status != 200 {
			t.Fatalf("page: %d %s", r.status, r.body)
		}
		pages++
		for _, d := range r.json["data"].([]any) {
			rec := d.(map[string]any)
			id := rec["id"].(string)
			if seen[id] || !ids[id] {
				t.Fatalf("id %s repeated or foreign", id)
			}
			if last != "" && rec["created_at"].(string) > last {
				t.Fatalf("not newest first")
			}
			last = rec["created_at"].(string)
			seen[id] = true
		}
		if r.json["next_cursor"] == nil {
			break
		}
		cursor = r.json["next_cursor"].(string)
	}
	if pages != 3 || len(seen) != 5 {
		t.Fatalf("%d pages, %d subscriptions", pages, len(seen))
	}
	if r := se.signed(t, k, "GET", "/v1/subscriptions?receiver="+firstReceiver, ""); len(r.json["data"].([]any)) != 1 {
		t.Fatalf("receiver filter: %s", r.body)
	}
	if r := se.signed(t, k, "GET", "/v1/subscriptions?status=cancelled", ""); len(r.json["data"].([]any)) != 0 {
		t.Fatalf("status filter: %s", r.body)
	}
	wantError(t, se.signed(t, k, "GET", "/v1/subscriptions?cursor=nonsense", ""), 400, 2001, "validation_failed", "cursor")
	wantError(t, se.signed(t, k, "GET", "/v1/subscriptions?limit=0", ""), 400, 2001, "validation_failed", "limit")
	wantError(t, se.signed(t, k, "GET", "/v1/subscriptions?status=dead", ""), 400, 2001, "validation_failed", "status")
}

// Concurrent duplicate creations: without a key the unique index lets one through (3011
// for the rest); with one Idempotency-Key every answer is the one subscription. Either way
// one fee is charged.
func TestConcurrentDuplicateSubscriptionCreates(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite)
	se.fund(t, se.acct.ID, 100_000_000)
	run := func(body string, header ...string) []response {
		const n = 12
		out := make([]response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for attempt := 0; ; attempt++ {
					r := se.signed(t, k, "POST", "/v1/subscriptions", body, header...)
					if r.status == 409 && r.json["error"].(map[string]any)["code"] == 3015.0 && attempt < 50 {
						time.Sleep(50 * time.Millisecond)
						continue
					}
					out[i] = r
					return
				}
			}()
		}
		close(start)
		wg.Wait()
		return out
	}
	addr := randomAddress(t).String()
	created, exists := 0, 0
	for _, r := range run(js(map[string]any{"address": addr, "preset": "basic"})) {
		switch {
		case r.status == 201:
			created++
		case r.status == 409 && r.json["error"].(map[string]any)["code"] == 3011.0:
			exists++
		default:
			t.Fatalf("unexpected %d %s", r.status, r.body)
		}
	}
	if created != 1 || exists != 11 {
		t.Fatalf("%d created, %d 3011", created, exists)
	}
	if got := se.available_(t, se.acct.ID); got != 94_000_000 {
		t.Fatalf("available %d: more than one fee charged", got)
	}

	addr2 := randomAddress(t).String()
	var body0 string
	created = 0
	for _, r := range run(js(map[string]any{"address": addr2, "preset": "basic"}), "Idempotency-Key", "sub-create-0001") {
		switch r.status {
		case 201:
			created++
		case 200:
			if r.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("200 without Idempotent-Replayed")
			}
		default:
			t.Fatalf("unexpected %d %s", r.status, r.body)
		}
		if body0 == "" {
			body0 = string(r.body)
		} else if string(r.body) != body0 {
			t.Fatalf("answers differ:\n%s\n%s", r.body, body0)
		}
	}
	if created != 1 || se.count(t, `SELECT count(*) FROM subscriptions WHERE receiver = $1`, addr2) != 1 {
		t.Fatalf("%d created", created)
	}
	if got := se.available_(t, se.acct.ID); got != 88_000_000 {
		t.Fatalf("available %d after the keyed creates", got)
	}
	if n := len(se.outboxEvents(t, "subscription.charged")); n != 2 {
		t.Fatalf("%d charged events, want 2", n)
	}
}

// Resuming a paused plan whose billing time has passed charges the day first: 4001 when it
// cannot be paid (nothing changes), then active with the fee charged and the next billing
// 24 hours on.
func TestSubscriptionResumeChargesADueFee(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite, scopes.SubscriptionsRead)
	se.fund(t, se.acct.ID, 7_000_000)
	r := se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": randomAddress(t).String(), "preset": "basic"}))
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	path := "/v1/subscriptions/" + r.json["id"].(string)
	checkFields(t, se.signed(t, k, "PATCH", path, `{"status":"paused"}`), 200, map[string]any{"status": "paused", "status_reason": "user"})
	se.clock.add(25 * time.Hour)
	e := wantError(t, se.signed(t, k, "PATCH", path, `{"status":"active"}`), 402, 4001, "insufficient_funds", nil)
	checkDetails(t, "4001", e, map[string]any{"required_sun": 6_000_000.0, "available_sun": 1_000_000.0})
	checkFields(t, se.signed(t, k, "GET", path, ""), 200, map[string]any{"status": "paused", "next_billing_at": "2025-03-02T12:00:01.000Z"})
	se.fund(t, se.acct.ID, 5_000_000)
	checkFields(t, se.signed(t, k, "PATCH", path, `{"status":"active"}`), 200, map[string]any{"status": "active", "status_reason": nil,
		"next_billing_at": "2025-03-03T13:00:01.000Z"})
	if got := se.available_(t, se.acct.ID); got != 0 {
		t.Fatalf("available %d", got)
	}
	g := se.signed(t, k, "GET", path, "")
	var kinds []string
	for _, ev := range g.json["events"].([]any) {
		kinds = append(kinds, ev.(map[string]any)["kind"].(string))
	}
	if js(kinds) != js([]string{"resume", "charge", "pause", "charge"}) {
		t.Fatalf("events newest first: %v", kinds)
	}
	if n := len(se.outboxEvents(t, "subscription.charged")); n != 2 {
		t.Fatalf("%d charged events", n)
	}
}

// GET of one plan subscription returns its last 20 events, newest first.
func TestSubscriptionEventsAreTheLastTwenty(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite, scopes.SubscriptionsRead)
	se.fund(t, se.acct.ID, 6_000_000)
	r := se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": randomAddress(t).String(), "preset": "basic"}))
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	path := "/v1/subscriptions/" + r.json["id"].(string)
	for range 12 { // charge + 24 = 25 events
		checkFields(t, se.signed(t, k, "PATCH", path, `{"status":"paused"}`), 200, map[string]any{"status": "paused"})
		checkFields(t, se.signed(t, k, "PATCH", path, `{"status":"active"}`), 200, map[string]any{"status": "active"})
	}
	g := se.signed(t, k, "GET", path, "")
	evs := g.json["events"].([]any)
	if len(evs) != 20 {
		t.Fatalf("%d events, want 20", len(evs))
	}
	for i, ev := range evs {
		want := "resume"
		if i%2 == 1 {
			want = "pause"
		}
		if kind := ev.(map[string]any)["kind"]; kind != want {
			t.Fatalf("event %d is %v, want %s (newest first)", i, kind, want)
		}
	}
	if n := se.count(t, `SELECT count(*) FROM subscription_events`); n != 25 {
		t.Fatalf("%d events stored", n)
	}
	// The list never carries events[].
	l := se.signed(t, k, "GET", "/v1/subscriptions", "")
	if _, ok := l.json["data"].([]any)[0].(map[string]any)["events"]; ok {
		t.Fatalf("events[] in the list: %s", l.body)
	}
}

// The owner's pause of a subscription the platform paused becomes a user pause (which the
// platform never ends); pausing a user-paused one again changes nothing.
func TestUserPauseOverridesAPlatformPause(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite, scopes.SubscriptionsRead)
	se.fund(t, se.acct.ID, 6_000_000)
	r := se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": randomAddress(t).String(), "preset": "basic"}))
	id := r.json["id"].(string)
	if _, err := se.db.Pool.Exec(context.Background(), `UPDATE subscriptions SET status = 'paused', status_reason = 'reserve_exhausted' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	checkFields(t, se.signed(t, k, "PATCH", "/v1/subscriptions/"+id, `{"status":"paused"}`), 200, map[string]any{"status": "paused", "status_reason": "user"})
	checkFields(t, se.signed(t, k, "PATCH", "/v1/subscriptions/"+id, `{"status":"paused"}`), 200, map[string]any{"status": "paused", "status_reason": "user"})
	if p := se.outboxEvents(t, "subscription.paused"); len(p) != 1 || p[0]["reason"] != "user" {
		t.Fatalf("subscription.paused %v", p)
	}
}

// The review's fee evasion (docs/subscriptions.md "Changing the reserve mid-day"): create
// basic (6 TRX a day), upgrade at once to 5,240,000 (240 TRX a day) and let the watcher
// top the address up from the large reserve, downgrade just before next_billing_at, pay
// the basic fee, upgrade again. Each upgrade pays the difference for the rest of the day,
// a downgrade refunds nothing, so the ledger shows what two days at 240 TRX cost.
func TestSubscriptionUpgradePaysForTheRestOfTheDay(t *testing.T) {
	se := newSubsEnv(t)
	k := se.key(t, scopes.SubscriptionsWrite, scopes.SubscriptionsRead)
	se.fund(t, se.acct.ID, 2_000_000_000)
	node := httptest.NewServer(se.sim.Handler())
	t.Cleanup(node.Close)
	w, err := subscriptions.New(subscriptions.Options{Pool: se.db.Pool, Chain: tron.NewClient(node.URL), Placer: se.accept,
		Ledger: se.ledger, Now: se.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	const trx = 1_000_000
	fees := func() int64 {
		return int64(se.count(t, `SELECT coalesce(sum(amount_sun), 0)::int FROM ledger_postings WHERE account_id = $1 AND ref LIKE 'capture:subfee:%'`, se.acct.ID))
	}
	patch := func(path, preset string) {
		t.Helper()
		checkFields(t, se.signed(t, k, "PATCH", path, js(map[string]any{"preset": preset})), 200, map[string]any{"preset": preset})
	}

	r := se.signed(t, k, "POST", "/v1/subscriptions", js(map[string]any{"address": se.activated.String(), "preset": "basic"}))
	checkFields(t, r, 201, map[string]any{"daily_fee_sun": 6.0 * trx, "next_billing_at": "2025-03-02T12:00:01.000Z"})
	path := "/v1/subscriptions/" + r.json["id"].(string)

	// Upgrade a second later: 234 TRX for the 23 h 59 min 59 s left (rounded up to whole TRX).
	se.clock.add(time.Second)
	patch(path, "5.24m")
	if got := fees(); got != 240*trx {
		t.Fatalf("fees after the upgrade: %d SUN, want 6 + 234 TRX", got)
	}
	ch := se.outboxEvents(t, "subscription.charged")
	if len(ch) != 2 || ch[1]["amount_sun"] != 234.0*trx || ch[1]["next_billing_at"] != "2025-03-02T12:00:01.000Z" {
		t.Fatalf("subscription.charged %v", ch)
	}
	// The watcher tops the address up from the large reserve.
	if _, err := w.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := se.count(t, `SELECT coalesce(sum(amount), 0)::int FROM orders WHERE subscription_id = $1`, r.json["id"]); d <= 131_000 {
		t.Fatalf("delegated %d from the 5.24m reserve", d)
	}

	// Downgrade a minute before billing: nothing refunded; upgrading again the same day costs
	// nothing more (the day is paid at 240), and neither does going back down.
	se.clock.add(24*time.Hour - time.Second - time.Minute)
	patch(path, "basic")
	patch(path, "5.24m")
	patch(path, "basic")
	if got := fees(); got != 240*trx {
		t.Fatalf("fees after the downgrade: %d SUN", got)
	}

	// The daily charge takes the basic fee; the next upgrade pays the rest of the new day.
	se.clock.add(2 * time.Minute)
	if _, err := w.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := fees(); got != 246*trx {
		t.Fatalf("fees after the second day's charge: %d SUN, want 246 TRX", got)
	}
	patch(path, "5.24m")
	if got := fees(); got != 480*trx {
		t.Fatalf("fees after the second upgrade: %d SUN, want two days at 240 TRX", got)
	}

	// An upgrade the balance cannot pay is 4001 and changes nothing.
	poor := se.newAccount(t)
	pk := se.keyFor(t, poor.ID, accounts.NewKey{Scopes: []string{scopes.SubscriptionsWrite, scopes.SubscriptionsRead}})
	se.fund(t, poor.ID, 7*trx)
	r2 := se.signed(t, pk, "POST", "/v1/subscriptions", js(map[string]any{"address": randomAddress(t).String(), "preset": "basic"}))
	checkFields(t, r2, 201, nil)
	path2 := "/v1/subscriptions/" + r2.json["id"].(string)
	e := wantError(t, se.signed(t, pk, "PATCH", path2, js(map[string]any{"preset": "1.3m"})), 402, 4001, "insufficient_funds", nil)
	checkDetails(t, "4001", e, map[string]any{"available_sun": 1.0 * trx})
	checkFields(t, se.signed(t, pk, "GET", path2, ""), 200, map[string]any{"preset": "basic", "daily_fee_sun": 6.0 * trx})
	if got := se.available_(t, poor.ID); got != trx {
		t.Fatalf("available after the refused upgrade: %d", got)
	}
}
