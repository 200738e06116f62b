package edge

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"rental/infra/acceptance"
	"rental/infra/accounts"
	"rental/schemas/scopes"
)

// groupSizes reads the group commit's histogram: groups stored and orders in them.
func groupSizes(t *testing.T, reg *prometheus.Registry) (groups, orders uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "rental_order_group_size" {
			var h *dto.Histogram = mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), uint64(h.GetSampleSum())
		}
	}
	return 0, 0
}

// Concurrent creations of several accounts share group transactions, and each still gets
// the answer it would get alone: created orders charged once, a short account's extra
// orders 4001 with nothing charged, an own receiver 3003, a repeated client_order_id the
// original body with 200.
func TestOrderGroupCommitMixedOutcomes(t *testing.T) {
	reg := prometheus.NewRegistry()
	oe := newOrdersEnv(t, func(o *acceptance.Options) {
		o.GroupCommitters, o.Registerer, o.MaxInFlight = 1, reg, 1000
	})
	const rich, poor = 3, 1
	var ids []string
	keys := map[string]func(body string) response{}
	for i := range rich + poor {
		a := oe.newAccount(t)
		k := oe.keyFor(t, a.ID, accounts.NewKey{Scopes: []string{scopes.OrdersWrite}})
		funds := int64(100_000_000)
		if i >= rich {
			funds = 1_000_000 // two orders of 400,000 SUN
		}
		oe.fund(t, a.ID, funds)
		ids = append(ids, a.ID)
		keys[a.ID] = func(body string) response { return oe.signed(t, k, "POST", "/v1/orders", body) }
	}
	order := func(coid, receiver string) string {
		return orderJSON(map[string]any{"client_order_id": coid, "resource": "energy", "amount": 10_000, "tier": "5m", "receiver": receiver})
	}
	type req struct {
		acct, body string
	}
	var reqs []req
	for i, id := range ids {
		for j := range 10 {
			reqs = append(reqs, req{id, order(fmt.Sprintf("g-%d-%d", i, j), oe.activated.String())})
		}
	}
	// The same client_order_id five times on the first account, and an own receiver.
	for range 5 {
		reqs = append(reqs, req{ids[0], order("g-dup", oe.activated.String())})
	}
	reqs = append(reqs, req{ids[1], order("g-ours", oe.pool.String())})

	answers := make([]response, len(reqs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, r := range reqs {
		wg.Go(func() {
			<-start
			answers[i] = keys[r.acct](r.body)
		})
	}
	close(start)
	wg.Wait()

	tally := map[string]int{}
	var dupBody string
	for i, a := range answers {
		r := reqs[i]
		code := fmt.Sprint(a.status)
		if a.status >= 400 {
			code = fmt.Sprint(a.json["error"].(map[string]any)["code"])
		}
		tally[code]++
		switch {
		case r.body == order("g-dup", oe.activated.String()):
			if a.status != 201 && a.status != 200 {
				t.Fatalf("duplicate answered %d %s", a.status, a.body)
			}
			if dupBody == "" {
				dupBody = string(a.body)
			} else if string(a.body) != dupBody {
				t.Fatalf("duplicate bodies differ:\n%s\n%s", a.body, dupBody)
			}
		case r.body == order("g-ours", oe.pool.String()):
			wantError(t, a, 422, 3003, "receiver_is_ours", "receiver")
		case r.acct == ids[rich]:
			if a.status != 201 {
				// The balance covers an order but two hold it: 4002.
				d := wantError(t, a, 402, 4002, "balance_reserved", nil)["details"].(map[string]any)
				if d["required_sun"] != 400_000.0 || d["available_sun"] != 200_000.0 {
					t.Fatalf("4001 details %v", d)
				}
			}
		default:
			if a.status != 201 {
				t.Fatalf("request %d: %d %s", i, a.status, a.body)
			}
		}
	}
	// Rich accounts: 10 orders each, the first one more (the duplicate); the poor one 2.
	if tally["201"] != 3*10+1+2 || tally["200"] != 4 {
		t.Fatalf("answers %v", tally)
	}
	for i, id := range ids {
		want := 10
		if i == 0 {
			want = 11
		}
		if i == rich {
			want = 2
		}
		s := oe.summary(t, id)
		if got := oe.count(t, `SELECT count(*) FROM orders WHERE account_id = $1`, id); got != want ||
			s.ReservedSun != int64(want)*400_000 || s.OrdersCreated != int64(want) {
			t.Fatalf("account %d: %d orders, summary %+v, want %d orders", i, got, s, want)
		}
	}
	if c := oe.count(t, `SELECT count(*) FROM outbox WHERE topic = 'orders.intents.v1'`); c != 3*10+1+2 {
		t.Fatalf("%d intents for %d orders", c, 3*10+1+2)
	}
	groups, stored := groupSizes(t, reg)
	if stored == 0 || groups >= stored {
		t.Fatalf("group commit stored %d orders in %d groups: no group held two", stored, groups)
	}
	t.Logf("answers %v; the group commit stored %d orders in %d transactions", tally, stored, groups)
	oe.checkInvariants(t)
}

// Group holds that take a balance below its low threshold send balance.low once, in the
// group's transaction, with the balance left.
func TestOrderGroupCommitLowBalance(t *testing.T) {
	reg := prometheus.NewRegistry()
	oe := newOrdersEnv(t, func(o *acceptance.Options) { o.GroupCommitters, o.Registerer = 1, reg })
	k := oe.key(t, scopes.OrdersWrite)
	oe.fund(t, oe.acct.ID, 11_000_000) // the default threshold is 10 TRX
	const n = 8                        // 8 x 400,000 SUN: 7,800,000 left
	var wg sync.WaitGroup
	start := make(chan struct{})
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() {
			<-start
			statuses[i] = oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": fmt.Sprintf("low-%d", i),
				"resource": "energy", "amount": 10_000, "tier": "5m", "receiver": oe.activated.String()})).status
		})
	}
	close(start)
	wg.Wait()
	for i, s := range statuses {
		if s != 201 {
			t.Fatalf("order %d: %d", i, s)
		}
	}
	// The balance it reports is the one left by the group that crossed the threshold.
	if c := oe.count(t, `SELECT count(*) FROM outbox WHERE headers->>'event' = 'balance.low'
		AND (convert_from(value, 'UTF8')::jsonb->'data'->>'balance_sun')::bigint BETWEEN 7800000 AND 9999999`); c != 1 {
		t.Fatalf("%d balance.low events with a balance between the last order's and the threshold", c)
	}
	if c := oe.count(t, `SELECT count(*) FROM outbox WHERE headers->>'event' = 'balance.low'`); c != 1 {
		t.Fatalf("%d balance.low events, want 1", c)
	}
	if c := oe.count(t, `SELECT count(*) FROM ledger_accounts WHERE account_id = $1 AND low_alerted`, oe.acct.ID); c != 1 {
		t.Fatal("the account is not marked alerted")
	}
	if groups, stored := groupSizes(t, reg); stored != n {
		t.Fatalf("the group commit stored %d of %d orders (%d groups)", stored, n, groups)
	}
	oe.checkInvariants(t)
}

// The receiver's energy ceiling holds across the orders of a group and across groups:
// concurrent orders to one receiver fill it exactly, the rest are 5005 with nothing charged.
func TestOrderGroupCommitReceiverCeiling(t *testing.T) {
	reg := prometheus.NewRegistry()
	oe := newOrdersEnv(t, func(o *acceptance.Options) {
		o.GroupCommitters, o.Registerer, o.ReceiverMaxEnergy, o.MaxInFlight = 2, reg, 50_000, 1000
	})
	k := oe.key(t, scopes.OrdersWrite)
	oe.fund(t, oe.acct.ID, 100_000_000)
	const n = 12 // of 10,000 energy each: 5 fit
	var wg sync.WaitGroup
	start := make(chan struct{})
	answers := make([]response, n)
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": fmt.Sprintf("ceil-%d", i),
				"resource": "energy", "amount": 10_000, "tier": "5m", "receiver": oe.activated.String()}))
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for _, a := range answers {
		if a.status == 201 {
			created++
			continue
		}
		wantError(t, a, 422, 5005, "receiver_capacity_exceeded", "receiver")
	}
	if created != 5 {
		t.Fatalf("%d orders created under a ceiling of 5", created)
	}
	if s := oe.summary(t, oe.acct.ID); s.ReservedSun != 5*400_000 || s.OrdersCreated != 5 {
		t.Fatalf("summary %+v", s)
	}
	if _, stored := groupSizes(t, reg); stored != 5 {
		t.Fatalf("the group commit stored %d orders, want all 5", stored)
	}
	oe.checkInvariants(t)
}
