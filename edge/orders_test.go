package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/acceptance"
	"rental/infra/accounts"
	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/orderstore"
	"rental/infra/quotes"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/ledger"
	"rental/schemas/network"
	"rental/schemas/pricing"
	"rental/schemas/scopes"
)

// The order tests run the real edge (key authentication, Postgres, Redis) with the pricing
// and order modules, the real ledger, and the TRON simulator over HTTP for receiver
// activation. Prices are those of pricing_test.go's testModel at testT0 (energy 1h: 100,000
// own at 60.00, 500,000 market at 60.01, 5,000,000 deep at 70.00; energy 5m: 100,000 own at
// 40.00 and nothing else; activation 1,100,000 SUN).

type ordersEnv struct {
	*pricingEnv
	ledger *ledgerstore.Ledger
	orders *Orders
	accept *acceptance.Orders
	idem   *idempotency.Store // the order module's
	pg     *pgxpool.Pool      // the edge's database, set before the modules are built
	pool   tron.Address       // a configured pool address
}

func newOrdersEnv(t *testing.T, opt func(*acceptance.Options), more ...func(*ordersEnv, *Options)) *ordersEnv {
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

	oe := &ordersEnv{pricingEnv: pe, pool: randomAddress(t)}
	base := newAuthEnv(t, authEnvOptions{skipServer: true})
	pe.quotes = quotes.New(base.db.Pool)
	oe.ledger, err = ledgerstore.New(base.db.Pool, ledgerstore.Options{Network: network.Nile})
	if err != nil {
		t.Fatal(err)
	}
	idem := idempotency.New(base.db.Pool, idempotency.Options{})
	oe.idem, oe.pg = idem, base.db.Pool
	pe.authEnv = newAuthEnv(t, authEnvOptions{shareWith: base, extra: func(o *Options) {
		prices, err := acceptance.NewPrices(acceptance.PricesOptions{
			Network: network.Nile, Snapshots: pe.snaps, Chain: tron.NewClient(node.URL), Now: pe.clock.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		pm, err := NewPricing(PricingOptions{Prices: prices, Quotes: pe.quotes, Idempotency: idem})
		if err != nil {
			t.Fatal(err)
		}
		ao := acceptance.Options{Network: network.Nile, Prices: prices, Ledger: oe.ledger, Idempotency: idem,
			OwnAddresses: []tron.Address{oe.pool}, ReceiverMaxEnergy: 0}
		if opt != nil {
			opt(&ao)
		}
		if oe.accept, err = acceptance.NewOrders(ao); err != nil {
			t.Fatal(err)
		}
		if oe.orders, err = NewOrders(OrdersOptions{Acceptance: oe.accept, Pool: base.db.Pool, Idempotency: idem}); err != nil {
			t.Fatal(err)
		}
		o.Modules = append(o.Modules, pm, oe.orders)
		for _, f := range more {
			f(oe, o)
		}
	}})
	return oe
}

// fund credits the account (a support adjustment) with sun.
func (oe *ordersEnv) fund(t *testing.T, accountID string, sun int64) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, oe.db.Pool, func(tx pgx.Tx) error {
		_, err := oe.ledger.Credit(ctx, tx, ledgerstore.Credit{AccountID: accountID, Kind: ledger.KindAdjustment,
			Ref: fmt.Sprintf("test-fund-%d", time.Now().UnixNano()), AmountSun: sun})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (oe *ordersEnv) summary(t *testing.T, accountID string) ledgerstore.Summary {
	t.Helper()
	s, err := oe.ledger.Summary(context.Background(), accountID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (oe *ordersEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := oe.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (oe *ordersEnv) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := oe.db.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

func (oe *ordersEnv) checkInvariants(t *testing.T) {
	t.Helper()
	vs, err := ledgerstore.CheckPool(context.Background(), oe.db.Pool, ledgerstore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("ledger invariant: %s", v)
	}
}

func orderJSON(fields map[string]any) string {
	b, _ := json.Marshal(fields)
	return string(b)
}

func TestOrderCreateHappyPath(t *testing.T) {
	oe := newOrdersEnv(t, nil)
	k := oe.key(t, scopes.OrdersWrite, scopes.OrdersRead)
	oe.fund(t, oe.acct.ID, 100_000_000)

	// Energy 1h, 150,000 units to an activated receiver: 100,000 own at 60.00 and 50,000
	// market at 60.01 = 9,000,500 SUN, unit price 60.00333 -> 60.00.
	body := orderJSON(map[string]any{"client_order_id": "order-0001", "resource": "energy", "amount": 150_000,
		"tier": "1h", "receiver": oe.activated.String()})
	r := oe.signed(t, k, "POST", "/v1/orders", body)
	checkFields(t, r, 201, map[string]any{
		"client_order_id": "order-0001", "batch_id": nil, "subscription_id": nil, "status": "created",
		"resource": "energy", "amount": 150_000.0, "delivered_amount": 0.0, "partial": false, "tier": "1h",
		"duration_seconds": 3600.0, "receiver": oe.activated.String(), "unit_price_sun": 60.0,
		"total_amount_sun": 9_000_500.0, "charged_amount_sun": 9_000_500.0, "refunded_amount_sun": 0.0,
		"delegate_hashes": []any{}, "delegated_at": nil, "expires_at": nil, "failure": nil, "filled_by": nil,
		"created_at": "2025-03-01T12:00:01.000Z", "updated_at": "2025-03-01T12:00:01.000Z",
	})
	act := r.json["activation"].(map[string]any)
	if act["performed"] != false || act["hash"] != nil || act["amount_sun"] != 0.0 {
		t.Errorf("activation %v", act)
	}
	id := r.json["id"].(string)
	if !orderIDPattern.MatchString(id) {
		t.Fatalf("id %q", id)
	}
	s := oe.summary(t, oe.acct.ID)
	if s.ReservedSun != 9_000_500 || s.AvailableSun != 100_000_000-9_000_500 || s.BalanceSun != 100_000_000 || s.OrdersCreated != 1 || s.EnergyUsed != 0 {
		t.Fatalf("after order: %+v", s)
	}
	if n := oe.count(t, `SELECT count(*) FROM ledger_holds WHERE ref = $1 AND amount_sun = 9000500 AND status = 'placed'`, id); n != 1 {
		t.Fatalf("%d holds", n)
	}
	if n := oe.count(t, `SELECT count(*) FROM outbox WHERE topic = 'orders.intents.v1' AND key = $1 AND headers->>'kind' = 'process'`, id); n != 1 {
		t.Fatalf("%d process intents", n)
	}

	// GET answers the same record.
	g := oe.signed(t, k, "GET", "/v1/orders/"+id, "")
	if g.status != 200 || string(g.body) != string(r.body) {
		t.Fatalf("GET %d %s\nPOST %s", g.status, g.body, r.body)
	}

	// A verbatim repeat (and one with other formatting and an explicit default): 200, the
	// identical body, nothing charged.
	for _, again := range []string{body, `{"receiver":"` + oe.activated.String() + `","tier":"1h","amount":150000,"resource":"energy","activate":false,"client_order_id":"order-0001"}`} {
		a := oe.signed(t, k, "POST", "/v1/orders", again)
		if a.status != 200 || string(a.body) != string(r.body) || a.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("repeat: %d %s", a.status, a.body)
		}
	}
	if s2 := oe.summary(t, oe.acct.ID); s2.ReservedSun != s.ReservedSun || s2.OrdersCreated != 1 {
		t.Fatalf("repeat charged: %+v", s2)
	}
	if n := oe.count(t, `SELECT count(*) FROM ledger_holds`); n != 1 {
		t.Fatalf("%d holds after repeats", n)
	}
	// The same client_order_id with another order: 3010 naming the original.
	e := wantError(t, oe.signed(t, k, "POST", "/v1/orders", strings.Replace(body, "150000", "150001", 1)), 409, 3010, "idempotency_conflict", nil)
	checkDetails(t, "3010", e, map[string]any{"original_id": id})

	// activate = true on an activated receiver: no fee. On a fresh one: the fee is added.
	r = oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "order-0002", "resource": "energy",
		"amount": 50_000, "tier": "5m", "receiver": oe.activated.String(), "activate": true}))
	checkFields(t, r, 201, map[string]any{"total_amount_sun": 2_000_000.0, "unit_price_sun": 40.0, "duration_seconds": 300.0})
	fresh := randomAddress(t)
	r = oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "order-0003", "resource": "energy",
		"amount": 50_000, "tier": "5m", "receiver": fresh.String(), "activate": true, "max_price_sun": 3_100_000}))
	checkFields(t, r, 201, map[string]any{"total_amount_sun": 3_100_000.0, "charged_amount_sun": 3_100_000.0})
	if act := r.json["activation"].(map[string]any); act["amount_sun"] != float64(testActivationSun) || act["performed"] != false {
		t.Errorf("activation %v", act)
	}
	// Activation alone: amount 1 and no tier; the fee is the total.
	r = oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "order-0004", "resource": "activation",
		"receiver": randomAddress(t).String()}))
	checkFields(t, r, 201, map[string]any{"resource": "activation", "amount": 1.0, "tier": nil, "duration_seconds": nil,
		"total_amount_sun": float64(testActivationSun), "unit_price_sun": float64(testActivationSun)})
	// Bandwidth 1h 2,000 at 800.
	r = oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "order-0005", "resource": "bandwidth",
		"amount": 2_000, "tier": "1h", "receiver": oe.activated.String()}))
	checkFields(t, r, 201, map[string]any{"resource": "bandwidth", "total_amount_sun": 1_600_000.0})

	want := int64(9_000_500 + 2_000_000 + 3_100_000 + testActivationSun + 1_600_000)
	s = oe.summary(t, oe.acct.ID)
	if s.ReservedSun != want || s.OrdersCreated != 5 || s.EnergyUsed != 0 { // energy counts at confirmation
		t.Fatalf("totals %+v, want reserved %d", s, want)
	}
	oe.checkInvariants(t)
}

func TestOrderWithQuote(t *testing.T) {
	oe := newOrdersEnv(t, nil)
	k := oe.key(t, scopes.OrdersWrite, scopes.OrdersRead, scopes.QuotesWrite)
	oe.fund(t, oe.acct.ID, 100_000_000)
	fresh := randomAddress(t)
	q := oe.signed(t, k, "POST", "/v1/quotes", `{"resource":"energy","tier":"1h","amount":200000,"receiver":"`+fresh.String()+`"}`)
	checkFields(t, q, 201, map[string]any{"total_amount_sun": 12_001_000.0 + testActivationSun})
	qid := q.json["id"].(string)

	// The price moves (evening factor 1.20); the quote's price holds.
	oe.clock.add(10 * time.Second)
	oe.snaps.set(buildSnapshot(t, testT0.Add(7*time.Hour)))
	// Parameters contradicting the quote: 2004.
	e := wantError(t, oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "q-1", "quote_id": qid,
		"amount": 200_001, "receiver": fresh.String(), "activate": true})), 422, 2004, "quote_mismatch", "amount")
	checkDetails(t, "2004", e, map[string]any{"quote_id": qid, "mismatched": []any{"amount"}})
	wantError(t, oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "q-1", "quote_id": qid,
		"receiver": oe.activated.String()})), 422, 2004, "quote_mismatch", "receiver")
	wantError(t, oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "q-1", "quote_id": qid,
		"resource": "bandwidth", "receiver": fresh.String()})), 422, 2004, "quote_mismatch", "resource")
	wantError(t, oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "q-1", "quote_id": "q_000000000000000000000000",
		"receiver": fresh.String()})), 400, 2001, "validation_failed", "quote_id")

	r := oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "q-1", "quote_id": qid,
		"resource": "energy", "tier": "1h", "receiver": fresh.String(), "activate": true}))
	checkFields(t, r, 201, map[string]any{"amount": 200_000.0, "tier": "1h", "unit_price_sun": 60.01,
		"total_amount_sun": 12_001_000.0 + testActivationSun})
	if s := oe.summary(t, oe.acct.ID); s.ReservedSun != 12_001_000+testActivationSun {
		t.Fatalf("reserved %d", s.ReservedSun)
	}

	// A quote locks the price, not stock: a quote for more than the book now holds is 5001.
	q = oe.signed(t, k, "POST", "/v1/quotes", `{"resource":"energy","tier":"1h","amount":5000000}`)
	checkFields(t, q, 201, nil)
	supply := testSupply()
	supply.Offers = supply.Offers[:1] // the deep reserve is gone
	s, err := pricing.Build(pricing.Inputs{Model: testModel(), Supply: supply, Now: testT0.Add(7 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	oe.snaps.set(s)
	before := oe.summary(t, oe.acct.ID)
	wantError(t, oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "q-2", "quote_id": q.json["id"],
		"receiver": oe.activated.String()})), 503, 5001, "insufficient_supply", nil)

	// Past its expires_at: 3005.
	oe.clock.add(3 * time.Minute)
	oe.snaps.set(buildSnapshot(t, testT0.Add(7*time.Hour+3*time.Minute)))
	e = wantError(t, oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "q-3", "quote_id": q.json["id"],
		"receiver": oe.activated.String()})), 409, 3005, "quote_expired", nil)
	checkDetails(t, "3005", e, map[string]any{"quote_id": q.json["id"]})
	if after := oe.summary(t, oe.acct.ID); after.AvailableSun != before.AvailableSun {
		t.Fatalf("refused orders charged: %+v vs %+v", after, before)
	}
	if n := oe.count(t, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders", n)
	}
}

// Every refusal of the spec, through HTTP: the right code and details, and nothing stored
// or charged.
func TestOrderCreateErrorsChargeNothing(t *testing.T) {
	ctx := context.Background()
	oe := newOrdersEnv(t, func(o *acceptance.Options) {
		o.MaxOrderEnergy = 2_000_000
		o.ReceiverMaxEnergy = 1_000_000
		o.MaxInFlight = 4
		o.LockWait = 300 * time.Millisecond
	})
	k := oe.key(t, scopes.OrdersWrite, scopes.OrdersRead)
	oe.fund(t, oe.acct.ID, 50_000_000)
	act := oe.activated.String()
	fresh := randomAddress(t).String()

	// Our addresses: a deposit address (of any account), a stake pool row, a configured pool.
	deposit, stake := randomAddress(t).String(), randomAddress(t).String()
	oe.exec(t, `INSERT INTO deposit_addresses (address, account_id, derivation_index, issued_at) VALUES ($1, $2, 424242, now())`, deposit, oe.acct.ID)
	oe.exec(t, `INSERT INTO stake_pools (address, network) VALUES ($1, 'nile')`, stake)

	energy := func(amount int64, tier, receiver string, extra ...any) string {
		f := map[string]any{"client_order_id": fmt.Sprintf("err-%d", time.Now().UnixNano()), "resource": "energy",
			"amount": amount, "tier": tier, "receiver": receiver}
		for i := 0; i+1 < len(extra); i += 2 {
			if extra[i+1] == nil {
				delete(f, extra[i].(string))
				continue
			}
			f[extra[i].(string)] = extra[i+1]
		}
		return orderJSON(f)
	}
	cases := []struct {
		name    string
		body    string
		status  int
		code    float64
		field   any
		details map[string]any
	}{
		{"no client_order_id", energy(50_000, "1h", act, "client_order_id", nil), 400, 2001, "client_order_id", map[string]any{"constraint": "required"}},
		{"client_order_id with space", energy(50_000, "1h", act, "client_order_id", "a b"), 400, 2001, "client_order_id", map[string]any{"constraint": "format"}},
		{"unknown field", energy(50_000, "1h", act, "colour", "red"), 400, 2001, "colour", map[string]any{"constraint": "unknown_field"}},
		{"bad resource", energy(50_000, "1h", act, "resource", "gas"), 400, 2001, "resource", map[string]any{"constraint": "enum"}},
		{"no amount", energy(50_000, "1h", act, "amount", nil), 400, 2001, "amount", map[string]any{"constraint": "required"}},
		{"amount type", energy(50_000, "1h", act, "amount", "5"), 400, 2001, "amount", map[string]any{"constraint": "type"}},
		{"no receiver", energy(50_000, "1h", act, "receiver", nil), 400, 2001, "receiver", map[string]any{"constraint": "required"}},
		{"negative max price", energy(50_000, "1h", act, "max_price_sun", -1), 400, 2001, "max_price_sun", map[string]any{"constraint": "min"}},
		{"activation of activated", orderJSON(map[string]any{"client_order_id": "err-act", "resource": "activation", "receiver": act}), 400, 2001, "receiver", map[string]any{"constraint": "already_activated"}},
		{"tier off", energy(50_000, "1d", act), 422, 2003, "tier", map[string]any{"available_tiers": []any{"5m", "1h"}}},
		{"tier retired", energy(50_000, "30d", act), 422, 2003, "tier", nil},
		{"bad address", energy(50_000, "1h", "TXYZ"), 400, 2007, "receiver", nil},
		{"hex address", energy(50_000, "1h", "41"+strings.Repeat("ab", 20)), 400, 2007, "receiver", nil},
		{"below min", energy(1, "1h", act), 400, 2008, "amount", map[string]any{"min_amount": 10_000.0, "max_amount": 2_000_000.0}},
		{"above row max", energy(20_000_000, "1h", act), 400, 2008, "amount", map[string]any{"max_amount": 2_000_000.0}},
		{"above account limit", energy(3_000_000, "1h", act), 400, 2008, "amount", map[string]any{"min_amount": 10_000.0, "max_amount": 2_000_000.0}},
		{"deposit address", energy(50_000, "1h", deposit), 422, 3003, "receiver", nil},
		{"stake pool", energy(50_000, "1h", stake), 422, 3003, "receiver", nil},
		{"configured pool", energy(50_000, "1h", oe.pool.String()), 422, 3003, "receiver", nil},
		{"not activated", energy(50_000, "1h", fresh), 422, 3004, "receiver", map[string]any{"activate_amount_sun": float64(testActivationSun)}},
		{"price above limit", energy(50_000, "1h", act, "max_price_sun", 2_999_999), 409, 3006, "max_price_sun", map[string]any{"total_amount_sun": 3_000_000.0, "max_price_sun": 2_999_999.0}},
		{"price above limit with fee", energy(50_000, "1h", fresh, "activate", true, "max_price_sun", 3_000_000), 409, 3006, "max_price_sun", map[string]any{"total_amount_sun": 4_100_000.0}},
		{"insufficient funds", energy(1_000_000, "1h", act), 402, 4001, nil, map[string]any{"required_sun": 63_805_000.0, "available_sun": 50_000_000.0}},
		{"no supply", energy(200_000, "5m", act), 503, 5001, nil, map[string]any{"available": 100_000.0}},
		{"paused", `{"client_order_id":"err-p","resource":"bandwidth","tier":"5m","amount":5000,"receiver":"` + act + `"}`, 503, 5006, "tier", nil},
	}
	for _, c := range cases {
		before := oe.summary(t, oe.acct.ID)
		r := oe.signed(t, k, "POST", "/v1/orders", c.body)
		e := envelopeOf(t, r)
		if r.status != c.status || e["code"] != c.code || e["field"] != c.field {
			t.Errorf("%s: got %d %v field %v: %s", c.name, r.status, e["code"], e["field"], r.body)
			continue
		}
		checkDetails(t, c.name, e, c.details)
		if after := oe.summary(t, oe.acct.ID); after.AvailableSun != before.AvailableSun || after.OrdersCreated != before.OrdersCreated {
			t.Errorf("%s charged: %+v -> %+v", c.name, before, after)
		}
	}
	if n := oe.count(t, `SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders stored by refusals", n)
	}
	if n := oe.count(t, `SELECT count(*) FROM ledger_holds`); n != 0 {
		t.Fatalf("%d holds by refusals", n)
	}
	if n := oe.count(t, `SELECT count(*) FROM idempotency_keys`); n != 0 {
		t.Fatalf("%d idempotency records by refusals", n)
	}

	// Refusals that need orders in place. 5005: the receiver's ceiling of 1,000,000 energy.
	okOrder := func(id string, amount int64, tier, receiver string) {
		t.Helper()
		r := oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": id, "resource": "energy",
			"amount": amount, "tier": tier, "receiver": receiver}))
		if r.status != 201 {
			t.Fatalf("%s: %d %s", id, r.status, r.body)
		}
	}
	refused := func(name, body string, status int, code float64, details map[string]any) map[string]any {
		t.Helper()
		before := oe.summary(t, oe.acct.ID)
		orders := oe.count(t, `SELECT count(*) FROM orders`)
		r := oe.signed(t, k, "POST", "/v1/orders", body)
		e := envelopeOf(t, r)
		if r.status != status || e["code"] != code {
			t.Fatalf("%s: got %d %v: %s", name, r.status, e["code"], r.body)
		}
		checkDetails(t, name, e, details)
		if after := oe.summary(t, oe.acct.ID); after.AvailableSun != before.AvailableSun {
			t.Errorf("%s charged: %+v -> %+v", name, before, after)
		}
		if n := oe.count(t, `SELECT count(*) FROM orders`); n != orders {
			t.Errorf("%s stored an order", name)
		}
		return e
	}
	okOrder("ok-1", 600_000, "1h", act) // 36,005,000 SUN
	refused("receiver ceiling", energy(500_000, "1h", act), 422, 5005, map[string]any{"max_additional": 400_000.0})

	// 4002: the balance (50 TRX) covers 20 TRX, but 36 TRX of it are held.
	refused("balance reserved", energy(300_000, "1h", act), 402, 4002, map[string]any{"required_sun": 18_002_000.0, "available_sun": 13_995_000.0})

	// 1101: at most 4 orders in flight.
	okOrder("ok-2", 10_000, "5m", act)
	okOrder("ok-3", 10_000, "5m", act)
	okOrder("ok-4", 10_000, "5m", act)
	refused("in flight", energy(10_000, "5m", act), 429, 1101, map[string]any{"limit": 4.0, "in_flight": 4.0})
	// A delivered order no longer counts.
	oe.exec(t, `UPDATE orders SET status = 'active' WHERE client_order_id = 'ok-4'`)
	okOrder("ok-5", 10_000, "5m", act)

	// 4004: another transaction holds the account's ledger row longer than LockWait.
	tx, err := oe.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM ledger_accounts WHERE account_id = $1 FOR UPDATE`, oe.acct.ID); err != nil {
		t.Fatal(err)
	}
	oe.exec(t, `UPDATE orders SET status = 'active'`)
	refused("ledger conflict", energy(10_000, "5m", act), 409, 4004, nil)
	_ = tx.Rollback(ctx)
	okOrder("ok-6", 10_000, "5m", act) // the same kind of order passes once the row is free

	// 1008: a suspended account may read but not order.
	oe.exec(t, `UPDATE accounts SET status = 'suspended' WHERE id = $1`, oe.acct.ID)
	ks := oe.key(t, scopes.OrdersWrite, scopes.OrdersRead) // a fresh key: no cached status
	wantError(t, oe.signed(t, ks, "POST", "/v1/orders", energy(10_000, "5m", act)), 403, 1008, "account_suspended", nil)
	if r := oe.signed(t, ks, "GET", "/v1/orders", ""); r.status != 200 {
		t.Fatalf("suspended read: %d %s", r.status, r.body)
	}
	oe.exec(t, `UPDATE accounts SET status = 'active' WHERE id = $1`, oe.acct.ID)
	// k's cached status may have been refreshed while the account was suspended (the key
	// cache's bound, KEY_CACHE_TTL): wait until k sees it active again, with a body that is
	// refused for itself (2000) and so stores nothing.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := oe.signed(t, k, "POST", "/v1/orders", `{`)
		if r.status != 403 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("k still refused 15 s after the account was reactivated: %d %s", r.status, r.body)
		}
	}

	// 4001 on an account that never had money.
	other := oe.newAccount(t)
	ko := oe.keyFor(t, other.ID, accounts.NewKey{Scopes: []string{scopes.OrdersWrite}})
	e := wantError(t, oe.signed(t, ko, "POST", "/v1/orders", energy(10_000, "5m", act)), 402, 4001, "insufficient_funds", nil)
	checkDetails(t, "unfunded", e, map[string]any{"required_sun": 400_000.0, "available_sun": 0.0})

	// The node cannot tell whether a fresh receiver is activated: 503 5003, nothing stored.
	if _, err := oe.sim.InjectFault(tronsim.FaultNodeDown, 1, 0); err != nil {
		t.Fatal(err)
	}
	refused("node down", energy(10_000, "5m", randomAddress(t).String(), "activate", true), 503, 5003, nil)

	// The snapshot is stale: 503, nothing stored.
	oe.clock.add(2 * time.Minute)
	refused("stale prices", energy(10_000, "5m", act), 503, 5003, map[string]any{"reason": "price_snapshot_stale"})
	oe.checkInvariants(t)
}

// Supply refinements: 5007 with spill forbidden, 5004 when the providers offer nothing.
func TestOrderSupplyErrors(t *testing.T) {
	oe := newOrdersEnv(t, func(o *acceptance.Options) { o.ForbidProviderSpill = true; o.MarketProviders = 1 })
	k := oe.key(t, scopes.OrdersWrite)
	oe.fund(t, oe.acct.ID, 100_000_000)
	act := oe.activated.String()
	e := wantError(t, oe.signed(t, k, "POST", "/v1/orders", `{"client_order_id":"s1","resource":"energy","tier":"1h","amount":150000,"receiver":"`+act+`"}`),
		503, 5007, "capacity_unavailable", nil)
	checkDetails(t, "5007", e, map[string]any{"available": 100_000.0})
	wantError(t, oe.signed(t, k, "POST", "/v1/orders", `{"client_order_id":"s2","resource":"energy","tier":"1h","amount":9000000,"receiver":"`+act+`"}`),
		503, 5007, "capacity_unavailable", nil)
	if r := oe.signed(t, k, "POST", "/v1/orders", `{"client_order_id":"s3","resource":"energy","tier":"1h","amount":100000,"receiver":"`+act+`"}`); r.status != 201 {
		t.Fatalf("own stock: %d %s", r.status, r.body)
	}

	oe2 := newOrdersEnv(t, func(o *acceptance.Options) { o.MarketProviders = 1 })
	k2 := oe2.key(t, scopes.OrdersWrite)
	oe2.fund(t, oe2.acct.ID, 100_000_000)
	// Energy 5m has no market level at all while a provider is configured: 5004.
	e = wantError(t, oe2.signed(t, k2, "POST", "/v1/orders", `{"client_order_id":"s1","resource":"energy","tier":"5m","amount":150000,"receiver":"`+oe2.activated.String()+`"}`),
		503, 5004, "provider_unavailable", nil)
	checkDetails(t, "5004", e, map[string]any{"available": 100_000.0})
	// Energy 1h has market levels: too large an order is plain 5001.
	wantError(t, oe2.signed(t, k2, "POST", "/v1/orders", `{"client_order_id":"s2","resource":"energy","tier":"1h","amount":9000000,"receiver":"`+oe2.activated.String()+`"}`),
		503, 5001, "insufficient_supply", nil)
	if n := oe.count(t, `SELECT count(*) FROM orders`) + oe2.count(t, `SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders", n)
	}
}

// 100 concurrent POSTs with one client_order_id: one order, one hold, identical bodies.
func TestOrderConcurrentSameClientOrderID(t *testing.T) {
	oe := newOrdersEnv(t, nil)
	k := oe.key(t, scopes.OrdersWrite)
	oe.fund(t, oe.acct.ID, 100_000_000)
	body := orderJSON(map[string]any{"client_order_id": "same-1", "resource": "energy", "amount": 50_000, "tier": "1h",
		"receiver": oe.activated.String()})
	const n = 100
	bodies := make([]string, n)
	statuses := make([]int, n)
	inProgress := 0
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for attempt := 0; ; attempt++ {
				r := oe.signed(t, k, "POST", "/v1/orders", body)
				if r.status == 409 && r.json["error"].(map[string]any)["code"] == 3015.0 && attempt < 50 {
					if r.header.Get("Retry-After") == "" {
						t.Error("3015 without Retry-After")
					}
					mu.Lock()
					inProgress++
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				}
				bodies[i], statuses[i] = string(r.body), r.status
				return
			}
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for i := range n {
		switch statuses[i] {
		case 201:
			created++
		case 200:
		default:
			t.Fatalf("request %d: %d %s", i, statuses[i], bodies[i])
		}
		if bodies[i] != bodies[0] {
			t.Fatalf("bodies differ:\n%s\n%s", bodies[i], bodies[0])
		}
	}
	if created != 1 {
		t.Fatalf("%d answers 201", created)
	}
	if c := oe.count(t, `SELECT count(*) FROM orders`); c != 1 {
		t.Fatalf("%d orders", c)
	}
	if c := oe.count(t, `SELECT count(*) FROM ledger_holds`); c != 1 {
		t.Fatalf("%d holds", c)
	}
	if s := oe.summary(t, oe.acct.ID); s.ReservedSun != 3_000_000 || s.OrdersCreated != 1 {
		t.Fatalf("summary %+v", s)
	}
	t.Logf("100 concurrent duplicates: one 201, %d answers 3015 retried", inProgress)
	oe.checkInvariants(t)

	// A first request that runs for longer than the 1 s wait: the repeat is 3015 with
	// Retry-After, and once the first completes the repeat gets its answer.
	ctx := context.Background()
	idem := idempotency.New(oe.db.Pool, idempotency.Options{})
	body2 := strings.Replace(body, "same-1", "same-2", 1)
	tx, err := oe.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	k2 := idempotency.Key{AccountID: oe.acct.ID, Namespace: idempotency.NamespaceOrder, Key: "same-2"}
	if c, err := idem.ClaimTx(ctx, tx, k2, []byte("held by the test")); err != nil || !c.Fresh {
		t.Fatalf("claim: %+v %v", c, err)
	}
	r := oe.signed(t, k, "POST", "/v1/orders", body2)
	wantError(t, r, 409, 3015, "request_in_progress", nil)
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}
	_ = tx.Rollback(ctx) // the first request failed: the key is free again
	if r := oe.signed(t, k, "POST", "/v1/orders", body2); r.status != 201 {
		t.Fatalf("after the first failed: %d %s", r.status, r.body)
	}
}

// 200 concurrent orders on one account with money for 100: never below zero, invariants hold.
func TestOrderConcurrentOneAccount(t *testing.T) {
	oe := newOrdersEnv(t, func(o *acceptance.Options) { o.MaxInFlight = 1000 })
	k := oe.key(t, scopes.OrdersWrite)
	oe.fund(t, oe.acct.ID, 40_000_000) // 100 orders of 400,000 SUN
	const n = 200
	codes := make([]float64, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	began := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": fmt.Sprintf("par-%03d", i),
				"resource": "energy", "amount": 10_000, "tier": "5m", "receiver": oe.activated.String()}))
			if r.status == 201 {
				codes[i] = 201
				return
			}
			codes[i] = r.json["error"].(map[string]any)["code"].(float64)
		}()
	}
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	tally := map[float64]int{}
	for _, c := range codes {
		tally[c]++
	}
	for c := range tally {
		if c != 201 && c != 4002 && c != 4001 && c != 4004 {
			t.Fatalf("unexpected answers %v", tally)
		}
	}
	s := oe.summary(t, oe.acct.ID)
	if s.AvailableSun < 0 || s.ReservedSun != int64(tally[201])*400_000 || tally[201] > 100 {
		t.Fatalf("summary %+v with %v", s, tally)
	}
	if tally[4004] == 0 && tally[201] != 100 {
		t.Fatalf("%d orders fit, want 100 (%v)", tally[201], tally)
	}
	if c := oe.count(t, `SELECT count(*) FROM orders`); c != tally[201] {
		t.Fatalf("%d order rows for %d created", c, tally[201])
	}
	t.Logf("200 concurrent orders in %v: %v", elapsed, tally)
	oe.checkInvariants(t)
}

func TestOrderListAndGet(t *testing.T) {
	oe := newOrdersEnv(t, nil)
	k := oe.key(t, scopes.OrdersWrite, scopes.OrdersRead)
	oe.fund(t, oe.acct.ID, 500_000_000)
	act := oe.activated.String()
	// Seven orders, one second apart; the first two share a second (ties go by id).
	var ids []string
	specs := []struct{ res, tier, cid string }{
		{"energy", "1h", "l-0"}, {"energy", "5m", "l-1"}, {"bandwidth", "1h", "l-2"}, {"energy", "1h", "l-3"},
		{"activation", "", "l-4"}, {"energy", "5m", "l-5"}, {"bandwidth", "1h", "l-6"},
	}
	for i, sp := range specs {
		if i > 1 {
			oe.clock.add(time.Second)
		}
		f := map[string]any{"client_order_id": sp.cid, "resource": sp.res, "receiver": act}
		if sp.res == "activation" {
			f["receiver"] = randomAddress(t).String()
		} else {
			f["tier"], f["amount"] = sp.tier, 10_000
		}
		r := oe.signed(t, k, "POST", "/v1/orders", orderJSON(f))
		if r.status != 201 {
			t.Fatalf("%s: %d %s", sp.cid, r.status, r.body)
		}
		ids = append(ids, r.json["id"].(string))
	}
	oe.exec(t, `UPDATE orders SET status = 'active' WHERE id = $1`, ids[3])
	oe.exec(t, `UPDATE orders SET batch_id = 'bat_1' WHERE id = ANY($1)`, []string{ids[1], ids[5]})
	// Newest first; the two orders of the first second in descending id.
	want := []string{ids[6], ids[5], ids[4], ids[3], ids[2]}
	if ids[0] > ids[1] {
		want = append(want, ids[0], ids[1])
	} else {
		want = append(want, ids[1], ids[0])
	}

	list := func(query string) ([]string, any) {
		t.Helper()
		r := oe.signed(t, k, "GET", "/v1/orders"+query, "")
		if r.status != 200 {
			t.Fatalf("%s: %d %s", query, r.status, r.body)
		}
		var got []string
		for _, d := range r.json["data"].([]any) {
			got = append(got, d.(map[string]any)["id"].(string))
		}
		return got, r.json["next_cursor"]
	}
	all, next := list("")
	if strings.Join(all, ",") != strings.Join(want, ",") || next != nil {
		t.Fatalf("list %v next %v, want %v", all, next, want)
	}
	// Pages of 3: 3, 3, 1, the last with next_cursor null.
	var paged []string
	cursor := ""
	for page := 0; ; page++ {
		q := "?limit=3"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		got, next := list(q)
		paged = append(paged, got...)
		if next == nil {
			if page != 2 || len(got) != 1 {
				t.Fatalf("page %d has %d", page, len(got))
			}
			break
		}
		if len(got) != 3 {
			t.Fatalf("page %d has %d", page, len(got))
		}
		cursor = next.(string)
	}
	if strings.Join(paged, ",") != strings.Join(want, ",") {
		t.Fatalf("paged %v, want %v", paged, want)
	}
	// Exactly one full page: next_cursor null.
	if got, next := list("?limit=7"); len(got) != 7 || next != nil {
		t.Fatalf("limit 7: %d %v", len(got), next)
	}

	filters := map[string][]string{
		"?status=active":                           {ids[3]},
		"?status=created,active&resource=energy":   {ids[5], ids[3], want[5], want[6]},
		"?resource=bandwidth":                      {ids[6], ids[2]},
		"?resource=activation":                     {ids[4]},
		"?client_order_id=l-5":                     {ids[5]},
		"?client_order_id=nope":                    nil,
		"?batch_id=bat_1":                          {ids[5], ids[1]},
		"?receiver=" + act:                         {ids[6], ids[5], ids[3], ids[2], want[5], want[6]},
		"?created_after=2025-03-01T12:00:03.000Z":  {ids[6], ids[5], ids[4]},
		"?created_before=2025-03-01T12:00:03.000Z": {ids[2], want[5], want[6]},
		"?created_after=2025-03-01T12:00:02Z&created_before=2025-03-01T12:00:04.000Z&limit=1": {ids[3]},
	}
	for q, w := range filters {
		got, _ := list(q)
		if strings.Join(got, ",") != strings.Join(w, ",") {
			t.Errorf("%s: %v, want %v", q, got, w)
		}
	}
	bad := map[string]string{
		"?limit=0": "limit", "?limit=201": "limit", "?limit=x": "limit", "?cursor=zzz": "cursor",
		"?cursor=" + orderCursor.encode(orderstore.Position{CreatedAt: testT0, ID: "ord_000000000000000000000000"})[:10]: "cursor", "?status=done": "status", "?created_after=yesterday": "created_after",
		"?created_before=2025-13-01": "created_before", "?receiver=TXYZ": "receiver", "?resource=gas": "resource",
		"?client_order_id=a%20b": "client_order_id", "?status=active&status=created": "status",
	}
	for q, field := range bad {
		wantError(t, oe.signed(t, k, "GET", "/v1/orders"+q, ""), 400, 2001, "validation_failed", field)
	}
	if got, _ := list("?limit=200"); len(got) != 7 {
		t.Fatalf("limit 200: %d", len(got))
	}

	// Another account sees none of them: empty list, 404 3001 on each.
	other := oe.newAccount(t)
	ko := oe.keyFor(t, other.ID, accounts.NewKey{Scopes: []string{scopes.OrdersRead, scopes.OrdersWrite}})
	if r := oe.signed(t, ko, "GET", "/v1/orders", ""); r.status != 200 || len(r.json["data"].([]any)) != 0 || r.json["next_cursor"] != nil {
		t.Fatalf("other account list: %s", r.body)
	}
	for _, id := range []string{ids[0], "ord_000000000000000000000000", "nonsense"} {
		wantError(t, oe.signed(t, ko, "GET", "/v1/orders/"+id, ""), 404, 3001, "order_not_found", "id")
	}
	// Scopes.
	kw := oe.key(t, scopes.OrdersWrite)
	wantError(t, oe.signed(t, kw, "GET", "/v1/orders", ""), 403, 1005, "insufficient_scope", nil)
	kr := oe.key(t, scopes.OrdersRead)
	wantError(t, oe.signed(t, kr, "POST", "/v1/orders", `{}`), 403, 1005, "insufficient_scope", nil)
	wantError(t, oe.ts.do(t, "GET", "/v1/orders", "", ""), 401, 1001, "missing_credentials", nil)
}

func TestOrderReclaim(t *testing.T) {
	oe := newOrdersEnv(t, nil)
	k := oe.key(t, scopes.OrdersWrite, scopes.OrdersRead)
	oe.fund(t, oe.acct.ID, 100_000_000)
	mk := func(cid string) string {
		t.Helper()
		r := oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": cid, "resource": "energy",
			"amount": 10_000, "tier": "1h", "receiver": oe.activated.String()}))
		if r.status != 201 {
			t.Fatalf("%s: %d %s", cid, r.status, r.body)
		}
		return r.json["id"].(string)
	}
	live, created, lapsed, provider, ended, confirmed := mk("r-1"), mk("r-2"), mk("r-3"), mk("r-4"), mk("r-5"), mk("r-6")
	future, past := testT0.Add(time.Hour), testT0.Add(-time.Minute)
	oe.exec(t, `UPDATE orders SET status = 'active', filled_by = 'own_pool', delegated_at = $2, expires_at = $3 WHERE id = $1`, live, testT0, future)
	oe.exec(t, `UPDATE orders SET status = 'confirmed', filled_by = 'own_pool', delegated_at = $2, expires_at = $3 WHERE id = $1`, confirmed, testT0, future)
	oe.exec(t, `UPDATE orders SET status = 'active', filled_by = 'own_pool', expires_at = $2 WHERE id = $1`, lapsed, past)
	oe.exec(t, `UPDATE orders SET status = 'active', filled_by = 'prov', expires_at = $2 WHERE id = $1`, provider, future)
	oe.exec(t, `UPDATE orders SET status = 'expired', filled_by = 'own_pool', expires_at = $2 WHERE id = $1`, ended, past)

	reclaim := func(id string, header ...string) response {
		return oe.signed(t, k, "POST", "/v1/orders/"+id+"/reclaim", "", header...)
	}
	e := wantError(t, reclaim(created), 409, 3007, "nothing_to_reclaim", nil)
	checkDetails(t, "3007 created", e, map[string]any{"status": "created"})
	wantError(t, reclaim(lapsed), 409, 3007, "nothing_to_reclaim", nil)
	e = wantError(t, reclaim(provider), 409, 3008, "reclaim_unavailable", nil)
	checkDetails(t, "3008", e, map[string]any{"filled_by": "prov"})
	e = wantError(t, reclaim(ended), 409, 3009, "order_in_terminal_state", nil)
	checkDetails(t, "3009", e, map[string]any{"status": "expired"})
	if n := oe.count(t, `SELECT count(*) FROM orders WHERE reclaim_requested_at IS NOT NULL`); n != 0 {
		t.Fatalf("refused reclaims marked %d orders", n)
	}

	r := reclaim(live, "Idempotency-Key", "reclaim-key-1")
	checkFields(t, r, 202, map[string]any{"id": live, "status": "active"})
	var at time.Time
	if err := oe.db.Pool.QueryRow(context.Background(), `SELECT reclaim_requested_at FROM orders WHERE id = $1`, live).Scan(&at); err != nil || !at.Equal(testT0.Add(time.Second)) {
		t.Fatalf("reclaim_requested_at %v %v", at, err)
	}
	intents := `SELECT count(*) FROM outbox WHERE topic = 'orders.intents.v1' AND key = $1 AND headers->>'kind' = 'reclaim'`
	if n := oe.count(t, intents, live); n != 1 {
		t.Fatalf("%d reclaim intents", n)
	}
	// The same Idempotency-Key: the stored answer with 200. Without a key: 202 again, but no
	// second intent.
	if a := reclaim(live, "Idempotency-Key", "reclaim-key-1"); a.status != 200 || string(a.body) != string(r.body) {
		t.Fatalf("repeat: %d %s", a.status, a.body)
	}
	checkFields(t, reclaim(live), 202, map[string]any{"id": live})
	if n := oe.count(t, intents, live); n != 1 {
		t.Fatalf("%d reclaim intents after repeats", n)
	}
	checkFields(t, reclaim(confirmed), 202, map[string]any{"status": "confirmed"})

	// Another account's order, an unknown id: 404 3001.
	other := oe.newAccount(t)
	ko := oe.keyFor(t, other.ID, accounts.NewKey{Scopes: []string{scopes.OrdersWrite}})
	for _, id := range []string{live, "ord_000000000000000000000000", "x"} {
		wantError(t, oe.signed(t, ko, "POST", "/v1/orders/"+id+"/reclaim", ""), 404, 3001, "order_not_found", "id")
	}
}

// A quote prices one order (docs/pricing.md "Quotes"): a second order with it is refused
// with 3023 quote_used and charges nothing, a retry of the first order (same
// client_order_id) still replays it, and of orders sent with one quote at once exactly one
// is accepted.
func TestQuotePricesOneOrder(t *testing.T) {
	oe := newOrdersEnv(t, nil)
	k := oe.key(t, scopes.OrdersWrite, scopes.OrdersRead, scopes.QuotesWrite)
	oe.fund(t, oe.acct.ID, 100_000_000)
	act := oe.activated.String()
	quote := func() string {
		q := oe.signed(t, k, "POST", "/v1/quotes", `{"resource":"energy","tier":"1h","amount":100000}`)
		checkFields(t, q, 201, nil)
		return q.json["id"].(string)
	}
	qid := quote()
	first := oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "one-1", "quote_id": qid, "receiver": act}))
	checkFields(t, first, 201, map[string]any{"amount": 100_000.0})
	before := oe.summary(t, oe.acct.ID)

	e := wantError(t, oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "one-2", "quote_id": qid, "receiver": act})),
		409, 3023, "quote_used", "quote_id")
	checkDetails(t, "3023", e, map[string]any{"quote_id": qid, "order_id": first.json["id"]})
	replay := oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": "one-1", "quote_id": qid, "receiver": act}))
	checkFields(t, replay, 200, map[string]any{"id": first.json["id"]})
	if after := oe.summary(t, oe.acct.ID); after.AvailableSun != before.AvailableSun || after.ReservedSun != before.ReservedSun || after.OrdersCreated != 1 {
		t.Fatalf("the refused order changed the account: %+v, was %+v", after, before)
	}

	// Racing orders with one fresh quote: one 201, the others 3023 (or 4004, a lost lock wait).
	qid = quote()
	const racers = 6
	codes := make([]int, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": fmt.Sprintf("race-%d", i), "quote_id": qid, "receiver": act}))
			codes[i] = r.status
			if r.status != 201 {
				if c, _ := r.json["error"].(map[string]any)["code"].(float64); c != 3023 && c != 4004 {
					t.Errorf("racer %d: %d %v", i, r.status, r.json)
				}
			}
		}()
	}
	wg.Wait()
	if n := slices.Index(codes, 201); n < 0 || slices.Index(codes[n+1:], 201) >= 0 {
		t.Fatalf("statuses %v, want exactly one 201", codes)
	}
	if n := oe.count(t, `SELECT count(*) FROM orders WHERE quote_id = $1`, qid); n != 1 {
		t.Fatalf("%d orders priced by quote %s", n, qid)
	}
	oe.checkInvariants(t)
}
