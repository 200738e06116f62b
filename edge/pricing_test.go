package edge

import (
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rental/infra/acceptance"
	"rental/infra/accounts"
	"rental/infra/idempotency"
	"rental/infra/quotes"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
	"rental/schemas/pricing"
	"rental/schemas/scopes"
)

// The pricing tests run the real edge (key authentication, idempotency records, Postgres,
// Redis) with the pricing module over a snapshot built by schemas/pricing from the
// model below, and the TRON simulator over HTTP for receiver activation.
//
// The energy 1h book of testModel at testT0 (day-part "day", factor 1.00):
//
//	instant 100,000 @ 60.00   (list price; 58.00 for orders of 1,000,000 and more)
//	market  500,000 @ 60.01   (cost 60.01, markup 0)
//	deep  5,000,000 @ 70.00   (cost 70.00, markup 0)
var testT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const testActivationSun = 1_100_000

func testModel() pricing.Model {
	return pricing.Model{
		Network:  network.Nile,
		Revision: 7,
		DayParts: []pricing.DayPart{
			{ID: "night", Label: "Night", StartMinute: 0, EndMinute: 360, FactorBPS: 8_000},
			{ID: "day", Label: "Day", StartMinute: 360, EndMinute: 1080, FactorBPS: 10_000},
			{ID: "evening", Label: "Evening", StartMinute: 1080, EndMinute: 1440, FactorBPS: 12_000},
		},
		Rows: []pricing.Row{
			{Resource: pricing.Energy, Tier: pricing.Tier5m, BasePrice: 4_000, MinAmount: 10_000, MaxAmount: 5_000_000, Enabled: true, FollowsSchedule: true},
			{Resource: pricing.Energy, Tier: pricing.Tier1h, BasePrice: 6_000, MinAmount: 10_000, MaxAmount: 10_000_000, Enabled: true, FollowsSchedule: true,
				VolumeSteps: []pricing.VolumeStep{{MinAmount: 1_000_000, Price: 5_800}}},
			{Resource: pricing.Energy, Tier: pricing.Tier1d, BasePrice: 9_000, MinAmount: 10_000, MaxAmount: 10_000_000, Enabled: false},
			{Resource: pricing.Bandwidth, Tier: pricing.Tier5m, BasePrice: 50_000, MinAmount: 1_000, MaxAmount: 100_000, Enabled: true, Paused: true},
			{Resource: pricing.Bandwidth, Tier: pricing.Tier1h, BasePrice: 80_000, MinAmount: 1_000, MaxAmount: 100_000, Enabled: true},
		},
		ActivationPriceSun: testActivationSun,
		PaymentAddresses:   map[string]string{"energy_1h": "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7"},
		ValidFor:           time.Minute,
	}
}

func testSupply() pricing.Supply {
	return pricing.Supply{
		Instant: map[pricing.Resource]int64{pricing.Energy: 100_000, pricing.Bandwidth: 50_000},
		Offers: []pricing.Offer{
			{Class: pricing.ClassMarket, Source: "prov", Resource: pricing.Energy, Tier: pricing.Tier1h, Cost: 6_001, Amount: 500_000},
			{Class: pricing.ClassDeep, Source: "deep", Resource: pricing.Energy, Tier: pricing.Tier1h, Cost: 7_000, Amount: 5_000_000},
		},
	}
}

func buildSnapshot(t testing.TB, at time.Time) pricing.Snapshot {
	t.Helper()
	s, err := pricing.Build(pricing.Inputs{Model: testModel(), Supply: testSupply(), DeliveredToday: 4_200_000, Now: at})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fixedSnapshots is a SnapshotSource holding what the test put there, or reading the
// source the test named with from (a real pricecache.Source).
type fixedSnapshots struct {
	p    atomic.Pointer[pricing.Snapshot]
	from atomic.Pointer[pricing.SnapshotSource]
}

// use makes Current read src from now on.
func (f *fixedSnapshots) use(src pricing.SnapshotSource) { f.from.Store(&src) }

func (f *fixedSnapshots) Current() (pricing.Snapshot, bool) {
	if src := f.from.Load(); src != nil {
		return (*src).Current()
	}
	s := f.p.Load()
	if s == nil {
		return pricing.Snapshot{}, false
	}
	return *s, true
}

func (f *fixedSnapshots) set(s pricing.Snapshot) { f.p.Store(&s) }

// pricingClock is the pricing module's clock.
type pricingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *pricingClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *pricingClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type pricingEnv struct {
	*authEnv
	snaps     *fixedSnapshots
	clock     *pricingClock
	sim       *tronsim.Sim
	activated tron.Address // activated at genesis
	quotes    *quotes.Store

	signMu   sync.Mutex
	lastSign time.Time
}

// signed signs each request with a later millisecond than the previous one: two identical
// requests signed in the same millisecond would carry the same signature, a replay (1009).
func (pe *pricingEnv) signed(t *testing.T, k accounts.CreatedKey, method, target, body string, header ...string) response {
	t.Helper()
	pe.signMu.Lock()
	at := time.Now().Truncate(time.Millisecond)
	if !at.After(pe.lastSign) {
		at = pe.lastSign.Add(time.Millisecond)
	}
	pe.lastSign = at
	pe.signMu.Unlock()
	return pe.signedAt(t, k, at, method, target, body, header...)
}

func newPricingEnv(t *testing.T) *pricingEnv {
	t.Helper()
	pe := &pricingEnv{snaps: &fixedSnapshots{}, clock: &pricingClock{t: testT0.Add(time.Second)}}
	pe.snaps.set(buildSnapshot(t, testT0))
	pe.activated = randomAddress(t)
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile,
		Genesis: []tronsim.GenesisAccount{{Address: pe.activated, BalanceSun: 5_000_000}}})
	if err != nil {
		t.Fatal(err)
	}
	node := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { node.Close(); _ = sim.Close() })
	pe.sim = sim

	base := newAuthEnv(t, authEnvOptions{skipServer: true})
	pe.quotes = quotes.New(base.db.Pool)
	pe.authEnv = newAuthEnv(t, authEnvOptions{shareWith: base, extra: func(o *Options) {
		prices, err := acceptance.NewPrices(acceptance.PricesOptions{
			Network: network.Nile, Snapshots: pe.snaps, Chain: tron.NewClient(node.URL), Now: pe.clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewPricing(PricingOptions{
			Prices: prices, Quotes: pe.quotes, Idempotency: idempotency.New(base.db.Pool, idempotency.Options{}),
		})
		if err != nil {
			t.Fatal(err)
		}
		o.Modules = append(o.Modules, m)
	}})
	return pe
}

func (pe *pricingEnv) get(t *testing.T, path string) response {
	t.Helper()
	return pe.ts.do(t, "GET", path, "", "")
}

func items(t *testing.T, r response) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, it := range r.json["items"].([]any) {
		m := it.(map[string]any)
		out[m["resource"].(string)+":"+m["tier"].(string)] = m
	}
	return out
}

func TestPricesShapeFilterAndAvailability(t *testing.T) {
	pe := newPricingEnv(t)
	r := pe.get(t, "/v1/prices")
	if r.status != 200 {
		t.Fatalf("GET /v1/prices: %d %s", r.status, r.body)
	}
	j := r.json
	if j["network"] != "nile" || j["as_of"] != "2025-03-01T12:00:00.000Z" || j["valid_until"] != "2025-03-01T12:01:00.000Z" {
		t.Fatalf("network/as_of/valid_until: %s", r.body)
	}
	for _, k := range []string{"period", "schedule", "available_energy", "delivered_today", "payment_addresses", "available_bandwidth", "items", "activation"} {
		if _, ok := j[k]; !ok {
			t.Errorf("PriceTable lacks %s", k)
		}
	}
	if p := j["period"].(map[string]any); p["id"] != "day" || p["start"] != "06:00" || p["end"] != "18:00" {
		t.Errorf("period %v", p)
	}
	if j["available_energy"] != float64(5_600_000) || j["available_bandwidth"] != float64(50_000) || j["delivered_today"] != float64(4_200_000) {
		t.Errorf("depths: %s", r.body)
	}
	if a := j["activation"].(map[string]any); a["price_sun"] != float64(testActivationSun) {
		t.Errorf("activation %v", a)
	}
	sched := j["schedule"].([]any)
	if len(sched) != 3 || sched[0].(map[string]any)["price_sun_per_unit"] != 48.0 || sched[2].(map[string]any)["factor_bps"] != 12_000.0 {
		t.Errorf("schedule %v", sched)
	}
	it := items(t, r)
	if len(it) != 4 {
		t.Fatalf("items %v", it)
	}
	if e := it["energy:1h"]; e["available"] != true || e["price_sun_per_unit"] != 60.0 || e["min_amount"] != 10_000.0 || e["max_amount"] != 10_000_000.0 ||
		len(e["volume_tiers"].([]any)) != 2 {
		t.Errorf("energy 1h row %v", e)
	}
	if e := it["energy:1d"]; e["available"] != false {
		t.Errorf("switched-off 1d row must be listed unavailable: %v", e)
	}
	if _, ok := it["bandwidth:5m"]; ok {
		t.Error("a paused row is listed")
	}

	// The resource filter.
	r = pe.get(t, "/v1/prices?resource=bandwidth")
	if it := items(t, r); r.status != 200 || len(it) != 1 || it["bandwidth:1h"] == nil {
		t.Fatalf("?resource=bandwidth: %s", r.body)
	}
	r = pe.get(t, "/v1/prices?resource=activation")
	if r.status != 200 || len(r.json["items"].([]any)) != 0 || r.json["activation"] == nil {
		t.Fatalf("?resource=activation: %s", r.body)
	}
	e := wantError(t, pe.get(t, "/v1/prices?resource=gas"), 400, 2001, "validation_failed", "resource")
	if d := e["details"].(map[string]any); d["constraint"] != "enum" {
		t.Errorf("details %v", d)
	}
	wantError(t, pe.get(t, "/v1/prices?resource="), 400, 2001, "validation_failed", "resource")
	e = wantError(t, pe.get(t, "/v1/prices?resource=energy&resource=bandwidth"), 400, 2001, "validation_failed", "resource")
	if e["details"].(map[string]any)["constraint"] != "repeated" {
		t.Errorf("repeated: %v", e)
	}

	// With an API key (P or K) the same table; a key without any pricing scope works.
	k := pe.key(t, scopes.AccountRead)
	if r := pe.signed(t, k, "GET", "/v1/prices?resource=energy", ""); r.status != 200 || len(items(t, r)) != 3 {
		t.Fatalf("signed GET /v1/prices: %d %s", r.status, r.body)
	}
	// A bad signature on a public endpoint that takes keys is refused, not ignored.
	r = pe.ts.do(t, "GET", "/v1/prices", "", "", "X-API-KEY", k.ID, "X-API-TIMESTAMP", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), "X-API-SIGN", "AAAA")
	wantError(t, r, 401, 1002, "invalid_signature", "X-API-SIGN")
}

func TestPricesWithoutFreshSnapshot(t *testing.T) {
	pe := newPricingEnv(t)
	// Past valid_until the snapshot is not served.
	pe.clock.add(time.Minute)
	e := wantError(t, pe.get(t, "/v1/prices"), 503, 5003, "chain_unavailable", nil)
	if e["retryable"] != true || e["details"].(map[string]any)["reason"] != "price_snapshot_stale" {
		t.Fatalf("stale: %v", e)
	}
	// A new snapshot is served from the next request on, re-rendered.
	pe.snaps.set(buildSnapshot(t, testT0.Add(time.Minute)))
	if r := pe.get(t, "/v1/prices"); r.status != 200 || r.json["as_of"] != "2025-03-01T12:01:00.000Z" {
		t.Fatalf("after refresh: %d %s", r.status, r.body)
	}
	// No snapshot at all.
	pe.snaps.p.Store(nil)
	for _, path := range []string{"/v1/prices", "/v1/orderbook", "/v1/estimate?resource=energy&amount=50000&tier=1h"} {
		e := wantError(t, pe.get(t, path), 503, 5003, "chain_unavailable", nil)
		if e["details"].(map[string]any)["reason"] != "no_price_snapshot" {
			t.Errorf("%s: %v", path, e)
		}
	}
	// Validation still comes first: bad input is 400 whatever the snapshot.
	wantError(t, pe.get(t, "/v1/prices?resource=x"), 400, 2001, "validation_failed", "resource")
}

func TestOrderBookAndWalk(t *testing.T) {
	pe := newPricingEnv(t)
	r := pe.get(t, "/v1/orderbook")
	if r.status != 200 || r.json["resource"] != "energy" || r.json["tier"] != "1h" || r.json["walk"] != nil ||
		r.json["floor_sun"] != 60.0 || r.json["depth"] != 5_600_000.0 || r.json["cheaper_from"] != "2025-03-02T00:00:00.000Z" {
		t.Fatalf("default book: %s", r.body)
	}
	levels := r.json["levels"].([]any)
	if len(levels) != 3 || levels[1].(map[string]any)["class"] != "market" || levels[1].(map[string]any)["price_sun"] != 60.01 {
		t.Fatalf("levels %v", levels)
	}

	// A walk across instant, market and deep:
	// (100,000 x 60.00 + 500,000 x 60.01 + 100,000 x 70.00) / 700,000 = 61.4357... -> 61.44.
	r = pe.get(t, "/v1/orderbook?resource=energy&tier=1h&amount=700000")
	w, _ := r.json["walk"].(map[string]any)
	if r.status != 200 || w == nil || w["unit_price_sun"] != 61.44 || w["total_sun"] != 43_005_000.0 ||
		w["complete"] != true || w["outstanding"] != 0.0 || len(w["fills"].([]any)) != 3 {
		t.Fatalf("walk: %s", r.body)
	}
	// Beyond the depth the walk is partial, not an error.
	r = pe.get(t, "/v1/orderbook?amount=6000000")
	if w := r.json["walk"].(map[string]any); r.status != 200 || w["complete"] != false || w["outstanding"] != 400_000.0 {
		t.Fatalf("partial walk: %s", r.body)
	}

	cases := []struct {
		query   string
		status  int
		code    float64
		field   any
		details map[string]any
	}{
		{"amount=abc", 400, 2001, "amount", map[string]any{"constraint": "type"}},
		{"amount=1.5", 400, 2001, "amount", map[string]any{"constraint": "type"}},
		{"amount=99999999999999999999", 400, 2001, "amount", map[string]any{"constraint": "type"}},
		{"amount=0", 400, 2008, "amount", map[string]any{"min_amount": 10_000.0, "max_amount": 10_000_000.0}},
		{"amount=-5", 400, 2008, "amount", map[string]any{"min_amount": 10_000.0}},
		{"amount=10000001", 400, 2008, "amount", map[string]any{"max_amount": 10_000_000.0}},
		{"resource=activation", 400, 2001, "resource", map[string]any{"constraint": "enum"}},
		{"resource=water", 400, 2001, "resource", nil},
		{"tier=2h", 400, 2001, "tier", map[string]any{"constraint": "enum"}},
		{"tier=1d", 422, 2003, "tier", map[string]any{"available_tiers": []any{"5m", "1h"}}},
		{"tier=30d", 422, 2003, "tier", nil},
		{"resource=bandwidth&tier=5m", 503, 5006, "tier", nil},
		{"tier=1h&tier=5m", 400, 2001, "tier", map[string]any{"constraint": "repeated"}},
	}
	for _, c := range cases {
		r := pe.get(t, "/v1/orderbook?"+c.query)
		e := envelopeOf(t, r)
		if r.status != c.status || e["code"] != c.code || e["field"] != c.field {
			t.Errorf("?%s: got %d %v field %v: %s", c.query, r.status, e["code"], e["field"], r.body)
			continue
		}
		checkDetails(t, c.query, e, c.details)
	}
}

func checkDetails(t *testing.T, name string, e map[string]any, want map[string]any) {
	t.Helper()
	d, _ := e["details"].(map[string]any)
	for k, v := range want {
		if got := d[k]; !equalJSON(got, v) {
			t.Errorf("%s: details.%s = %v, want %v", name, k, got, v)
		}
	}
}

func equalJSON(a, b any) bool {
	am, amok := a.(map[string]any)
	bm, bmok := b.(map[string]any)
	if amok || bmok {
		if !amok || !bmok || len(am) != len(bm) {
			return false
		}
		for k, v := range am {
			if w, ok := bm[k]; !ok || !equalJSON(v, w) {
				return false
			}
		}
		return true
	}
	as, aok := a.([]any)
	bs, bok := b.([]any)
	if aok || bok {
		if len(as) != len(bs) {
			return false
		}
		for i := range as {
			if !equalJSON(as[i], bs[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

func TestEstimateValidation(t *testing.T) {
	pe := newPricingEnv(t)
	hex := "41" + strings.Repeat("ab", 20)
	bad := pe.activated.String()
	bad = bad[:33] + map[bool]string{true: "2", false: "3"}[bad[33] == '3'] // checksum broken
	cases := []struct {
		query   string
		status  int
		code    float64
		field   any
		details map[string]any
	}{
		{"amount=50000&tier=1h", 400, 2001, "resource", map[string]any{"constraint": "required"}},
		{"resource=gas&amount=50000&tier=1h", 400, 2001, "resource", map[string]any{"constraint": "enum"}},
		{"resource=energy&tier=1h", 400, 2001, "amount", map[string]any{"constraint": "required"}},
		{"resource=energy&amount=&tier=1h", 400, 2001, "amount", map[string]any{"constraint": "type"}},
		{"resource=energy&amount=5e4&tier=1h", 400, 2001, "amount", map[string]any{"constraint": "type", "expected": "integer"}},
		{"resource=energy&amount=50000", 400, 2001, "tier", map[string]any{"constraint": "required"}},
		{"resource=energy&amount=50000&tier=1H", 400, 2001, "tier", map[string]any{"constraint": "enum"}},
		{"resource=energy&amount=9999&tier=1h", 400, 2008, "amount", map[string]any{"min_amount": 10_000.0, "max_amount": 10_000_000.0}},
		{"resource=energy&amount=50000&tier=1d", 422, 2003, "tier", map[string]any{"available_tiers": []any{"5m", "1h"}}},
		{"resource=energy&amount=50000&tier=15m", 422, 2003, "tier", map[string]any{"available_tiers": []any{"5m", "1h"}}},
		{"resource=bandwidth&amount=5000&tier=1d", 422, 2003, "tier", map[string]any{"available_tiers": []any{"1h"}}},
		{"resource=bandwidth&amount=5000&tier=5m", 503, 5006, "tier", nil},
		{"resource=energy&amount=6000000&tier=1h", 503, 5001, nil, map[string]any{"available": 5_600_000.0}},
		{"resource=energy&amount=50000&tier=1h&receiver=" + hex, 400, 2007, "receiver", nil},
		{"resource=energy&amount=50000&tier=1h&receiver=" + bad, 400, 2007, "receiver", nil},
		{"resource=energy&amount=50000&tier=1h&receiver=", 400, 2007, "receiver", nil},
		{"resource=activation&receiver=Tnope", 400, 2007, "receiver", nil},
	}
	for _, c := range cases {
		r := pe.get(t, "/v1/estimate?"+c.query)
		e := envelopeOf(t, r)
		if r.status != c.status || e["code"] != c.code || e["field"] != c.field {
			t.Errorf("?%s: got %d %v field %v: %s", c.query, r.status, e["code"], e["field"], r.body)
			continue
		}
		checkDetails(t, c.query, e, c.details)
	}
}

func TestEstimateAndActivationFee(t *testing.T) {
	pe := newPricingEnv(t)
	fresh := randomAddress(t)

	// No receiver: no activation part, receiver_activated null.
	r := pe.get(t, "/v1/estimate?resource=energy&amount=50000&tier=1h")
	want := map[string]any{"resource": "energy", "amount": 50_000.0, "tier": "1h", "receiver": nil,
		"price_sun_per_unit": 60.0, "energy_amount_sun": 3_000_000.0, "activate_amount_sun": 0.0,
		"total_amount_sun": 3_000_000.0, "receiver_activated": nil, "as_of": "2025-03-01T12:00:00.000Z"}
	checkFields(t, r, 200, want)

	// An activated receiver: no fee.
	r = pe.get(t, "/v1/estimate?resource=energy&amount=50000&tier=1h&receiver="+pe.activated.String())
	checkFields(t, r, 200, map[string]any{"receiver": pe.activated.String(), "receiver_activated": true,
		"activate_amount_sun": 0.0, "total_amount_sun": 3_000_000.0})

	// A receiver never seen on chain: the activation fee is added.
	r = pe.get(t, "/v1/estimate?resource=energy&amount=50000&tier=1h&receiver="+fresh.String())
	checkFields(t, r, 200, map[string]any{"receiver_activated": false,
		"energy_amount_sun": 3_000_000.0, "activate_amount_sun": float64(testActivationSun), "total_amount_sun": 3_000_000.0 + testActivationSun})

	// It gets activated on chain; the cached answer holds for the TTL, then the node is
	// read again.
	if _, err := pe.sim.TransferTRX(fresh, 1_000_000, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pe.sim.Mine(1); err != nil {
		t.Fatal(err)
	}
	path := "/v1/estimate?resource=bandwidth&amount=5000&tier=1h&receiver=" + fresh.String()
	checkFields(t, pe.get(t, path), 200, map[string]any{"receiver_activated": false, "activate_amount_sun": float64(testActivationSun),
		"energy_amount_sun": 4_000_000.0, "price_sun_per_unit": 800.0})
	pe.clock.add(6 * time.Second)
	checkFields(t, pe.get(t, path), 200, map[string]any{"receiver_activated": true, "activate_amount_sun": 0.0, "total_amount_sun": 4_000_000.0})

	// The node fails: receiver_activated null and no fee (an estimate is non-binding).
	other := randomAddress(t)
	if _, err := pe.sim.InjectFault(tronsim.FaultNodeDown, 1, 0); err != nil {
		t.Fatal(err)
	}
	r = pe.get(t, "/v1/estimate?resource=energy&amount=50000&tier=1h&receiver="+other.String())
	checkFields(t, r, 200, map[string]any{"receiver_activated": nil, "activate_amount_sun": 0.0, "total_amount_sun": 3_000_000.0})
	// The failure was not cached.
	r = pe.get(t, "/v1/estimate?resource=energy&amount=50000&tier=1h&receiver="+other.String())
	checkFields(t, r, 200, map[string]any{"receiver_activated": false, "activate_amount_sun": float64(testActivationSun)})

	// Activation: amount and tier do not apply (ignored when sent).
	r = pe.get(t, "/v1/estimate?resource=activation")
	checkFields(t, r, 200, map[string]any{"resource": "activation", "amount": 1.0, "tier": nil, "price_sun_per_unit": float64(testActivationSun),
		"energy_amount_sun": 0.0, "activate_amount_sun": float64(testActivationSun), "total_amount_sun": float64(testActivationSun)})
	r = pe.get(t, "/v1/estimate?resource=activation&amount=junk&tier=junk&receiver="+other.String())
	checkFields(t, r, 200, map[string]any{"receiver": other.String(), "receiver_activated": false, "total_amount_sun": float64(testActivationSun)})
}

// checkFields checks the status and the listed top-level fields of a JSON answer.
func checkFields(t *testing.T, r response, status int, want map[string]any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("HTTP %d, want %d: %s", r.status, status, r.body)
	}
	for k, v := range want {
		got, ok := r.json[k]
		if !ok || !equalJSON(got, v) {
			t.Errorf("%s = %v (present %v), want %v in %s", k, got, ok, v, r.body)
		}
	}
}

// Rounding boundaries, through the endpoints. Instant 100,000 @ 60.00 then market @ 60.01:
// for an amount of 100,000 + k the exact unit price is 60 + 0.01 x k / (100,000 + k).
func TestRoundingBoundaries(t *testing.T) {
	pe := newPricingEnv(t)
	k := pe.key(t, scopes.QuotesWrite, scopes.QuotesRead)
	cases := []struct {
		amount    int64
		unit      float64 // unit_price_sun: half up to 0.01
		perUnit   float64 // price_sun_per_unit: exact price rounded up
		energySun float64 // exact total rounded up to whole SUN
		fills     int
	}{
		// One uniform price: exact, fills empty.
		{100_000, 60, 60, 6_000_000, 0},
		// 60.0000999...: the legacy integer rounds up to 61, the exact price shows 60.
		{100_001, 60, 61, 6_000_061, 2}, // 600,006,001 centisun = 6,000,060.01 SUN, rounded up
		// 60.0049999... -> 60.00 (just below the half).
		{199_999, 60, 61, 12_000_940, 2},
		// exactly 60.005 -> 60.01 (half rounds up).
		{200_000, 60.01, 61, 12_001_000, 2},
		// from 1,000,000 the instant part is priced at the volume tier 58.00:
		// (100,000 x 58 + 500,000 x 60.01 + 400,000 x 70) / 1,000,000 = 63.805 -> 63.81
		{1_000_000, 63.81, 64, 63_805_000, 3},
	}
	for _, c := range cases {
		q := url.Values{"resource": {"energy"}, "amount": {fmtInt(c.amount)}, "tier": {"1h"}}.Encode()
		r := pe.get(t, "/v1/estimate?"+q)
		checkFields(t, r, 200, map[string]any{"price_sun_per_unit": c.perUnit, "energy_amount_sun": c.energySun})
		w := pe.get(t, "/v1/orderbook?amount="+fmtInt(c.amount)).json["walk"].(map[string]any)
		if w["unit_price_sun"] != c.unit || w["total_sun"] != c.energySun {
			t.Errorf("amount %d: walk %v", c.amount, w)
		}
		r = pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"energy","tier":"1h","amount":`+fmtInt(c.amount)+`}`)
		checkFields(t, r, 201, map[string]any{"unit_price_sun": c.unit, "price_sun_per_unit": c.perUnit,
			"energy_amount_sun": c.energySun, "total_amount_sun": c.energySun})
		if f := r.json["fills"].([]any); len(f) != c.fills {
			t.Errorf("amount %d: fills %v", c.amount, f)
		}
	}
	// The number is written from fixed point: two decimals at most, no float artefacts.
	r := pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"energy","tier":"1h","amount":700000}`)
	if !strings.Contains(string(r.body), `"unit_price_sun":61.44,`) || !strings.Contains(string(r.body), `{"price_sun":60.01,"amount":500000,"class":"market"}`) {
		t.Fatalf("JSON numbers: %s", r.body)
	}
}

func fmtInt(n int64) string { return strconv.FormatInt(n, 10) }
