package subscriptions_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/acceptance"
	"rental/infra/tron"
	"rental/processors/subscriptions"
	"rental/schemas/autorefill"
	"rental/schemas/orders"
)

// A receiver whose energy runs out is refilled: the order is placed through the order
// module, delivered by the order processor, and subscription.refilled is sent once per
// refill. No second refill is placed while the first is being delivered. Once
// max_refills_per_day is reached the subscription is suspended (daily_limit_reached, one
// event), and the next UTC day it resumes by itself.
func TestRefillDeliveredThenDailyLimitSuspends(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(1_000 * 1_000_000)
	recv := e.receiver()
	id := e.legacy(acc, recv, legacySpec{threshold: 30_000, refill: 65_000, maxPrice: ptr(int64(10_000_000)), maxRefillsPerDay: ptr(2)})
	e.startWatcher(100 * time.Millisecond)

	// The address has no energy: the first check refills it.
	e.waitFor("first refill delivered", 30*time.Second, func() bool {
		s := e.sub(id)
		return s.LastOrderID != nil && (e.orderStatus(*s.LastOrderID) == "confirmed" || e.orderStatus(*s.LastOrderID) == "active")
	})
	s := e.sub(id)
	first := *s.LastOrderID
	if s.RefillsToday != 1 || s.RefillSeq != 1 || s.Status != autorefill.Active || s.LastRefillAt == nil {
		t.Fatalf("after the first refill: %+v", s)
	}
	var coid, subID string
	var amount, total int64
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT client_order_id, subscription_id, amount, total_amount_sun FROM orders WHERE id = $1`, first).
		Scan(&coid, &subID, &amount, &total); err != nil {
		t.Fatal(err)
	}
	// 65,000 energy for 1 h at 60.00 SUN.
	if coid != id+":r1" || subID != id || amount != 65_000 || total != 3_900_000 {
		t.Fatalf("order %s: client_order_id %s, subscription %s, amount %d, total %d", first, coid, subID, amount, total)
	}
	refilled := e.events(id, "subscription.refilled")
	if len(refilled) != 1 {
		t.Fatalf("%d refilled events", len(refilled))
	}
	if !sameJSON(refilled[0], map[string]any{"subscription_id": id, "order_id": first, "receiver": recv.String(), "resource": "energy",
		"amount": 65_000, "tier": "1h", "trigger_available": 0, "threshold_amount": 30_000, "total_amount_sun": 3_900_000, "refills_today": 1}) {
		t.Fatalf("subscription.refilled %v", refilled[0])
	}
	// Delivered energy is above the threshold: further checks place nothing.
	time.Sleep(500 * time.Millisecond)
	if n := e.count(`SELECT count(*) FROM orders WHERE subscription_id = $1`, id); n != 1 {
		t.Fatalf("%d orders with energy above the threshold", n)
	}

	// The address spends most of it: the second refill, with the energy seen.
	seen := e.energy(recv)
	e.useEnergy(recv, seen-10_000)
	e.waitFor("second refill", 30*time.Second, func() bool { return len(e.events(id, "subscription.refilled")) == 2 })
	second := e.events(id, "subscription.refilled")[1]
	if second["refills_today"] != 2.0 || second["trigger_available"].(float64) >= 30_000 || second["order_id"] == first {
		t.Fatalf("second refill %v", second)
	}
	e.waitFor("second refill delivered", 30*time.Second, func() bool {
		st := e.orderStatus(*e.sub(id).LastOrderID)
		return st == "confirmed" || st == "active"
	})

	// The third refill is due but the daily limit of 2 is reached: suspended, once.
	e.useEnergy(recv, e.energy(recv)-1_000)
	e.waitFor("suspension", 10*time.Second, func() bool { return e.sub(id).Status == autorefill.Suspended })
	time.Sleep(500 * time.Millisecond) // several more checks
	sus := e.events(id, "subscription.suspended")
	if len(sus) != 1 || !sameJSON(sus[0], map[string]any{"subscription_id": id, "receiver": recv.String(), "reason": "daily_limit_reached",
		"required_sun": nil, "available_sun": nil}) {
		t.Fatalf("subscription.suspended %v", sus)
	}
	if n := e.count(`SELECT count(*) FROM orders WHERE subscription_id = $1`, id); n != 2 {
		t.Fatalf("%d orders under the daily limit of 2", n)
	}

	// The next UTC day the limit clears: it resumes and refills.
	e.clock.Add(24 * time.Hour)
	e.waitFor("refill on the next day", 30*time.Second, func() bool { return len(e.events(id, "subscription.refilled")) == 3 })
	s = e.sub(id)
	if s.Status != autorefill.Active || s.RefillsToday != 1 || s.RefillSeq != 3 {
		t.Fatalf("next day: %+v", s)
	}
	if third := e.events(id, "subscription.refilled")[2]; third["refills_today"] != 1.0 {
		t.Fatalf("third refill %v", third)
	}
}

// An account that cannot pay a refill is suspended with insufficient_funds (required_sun
// and available_sun), once however many checks see it, and resumes by itself after a
// credit: the refill is placed and the subscription is active again.
func TestInsufficientFundsSuspendsAndCreditResumes(t *testing.T) {
	e := newEnv(t)
	acc := e.account(1_000_000) // 1 TRX; a refill of 65,000 for 1 h costs 3.9 TRX
	recv := e.receiver()
	id := e.legacy(acc, recv, legacySpec{threshold: 30_000, refill: 65_000})
	e.startWatcher(100 * time.Millisecond)

	e.waitFor("suspension", 10*time.Second, func() bool { return e.sub(id).Status == autorefill.Suspended })
	time.Sleep(600 * time.Millisecond) // several more checks
	sus := e.events(id, "subscription.suspended")
	if len(sus) != 1 || !sameJSON(sus[0], map[string]any{"subscription_id": id, "receiver": recv.String(), "reason": "insufficient_funds",
		"required_sun": 3_900_000, "available_sun": 1_000_000}) {
		t.Fatalf("subscription.suspended %v", sus)
	}
	if s := e.sub(id); s.LastOrderID != nil || e.count(`SELECT count(*) FROM orders`) != 0 || e.availableSun(acc) != 1_000_000 {
		t.Fatalf("a refused refill left something: %+v", s)
	}

	e.credit(acc, 10_000_000)
	e.waitFor("refill after the credit", 10*time.Second, func() bool { return len(e.events(id, "subscription.refilled")) == 1 })
	s := e.sub(id)
	if s.Status != autorefill.Active || s.StatusReason != nil || s.LastOrderID == nil {
		t.Fatalf("after the credit: %+v", s)
	}
	if got := e.availableSun(acc); got != 11_000_000-3_900_000 {
		t.Fatalf("available %d after one refill", got)
	}
	if n := len(e.events(id, "subscription.suspended")); n != 1 {
		t.Fatalf("%d suspended events", n)
	}
}

// A refill whose live total is above max_price_sun is skipped (no order, nothing charged)
// and the subscription is suspended with price_above_limit once; raising the cap lets the
// next check refill and resume it.
func TestPriceAboveLimitSkipsAndSuspends(t *testing.T) {
	e := newEnv(t)
	acc := e.account(100_000_000)
	recv := e.receiver()
	id := e.legacy(acc, recv, legacySpec{threshold: 30_000, refill: 65_000, maxPrice: ptr(int64(3_000_000))})
	e.startWatcher(100 * time.Millisecond)
	e.waitFor("suspension", 10*time.Second, func() bool { return e.sub(id).Status == autorefill.Suspended })
	time.Sleep(500 * time.Millisecond)
	sus := e.events(id, "subscription.suspended")
	if len(sus) != 1 || !sameJSON(sus[0], map[string]any{"subscription_id": id, "receiver": recv.String(), "reason": "price_above_limit",
		"required_sun": 3_900_000, "available_sun": nil}) {
		t.Fatalf("subscription.suspended %v", sus)
	}
	if e.count(`SELECT count(*) FROM orders`) != 0 || len(e.events(id, "subscription.refilled")) != 0 || e.availableSun(acc) != 100_000_000 {
		t.Fatal("a skipped refill placed or charged something")
	}
	if _, err := e.db.Pool.Exec(context.Background(), `UPDATE subscriptions SET max_price_sun = 4000000 WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	e.waitFor("refill under the new cap", 10*time.Second, func() bool { return len(e.events(id, "subscription.refilled")) == 1 })
	if s := e.sub(id); s.Status != autorefill.Active {
		t.Fatalf("status %s", s.Status)
	}
}

// Two watcher replicas on the same subscriptions never place one refill twice: each
// subscription gets exactly one order (the first is still in flight, no processor runs),
// one refilled event and refill sequence 1.
func TestTwoReplicasNeverPlaceARefillTwice(t *testing.T) {
	e := newEnv(t)
	acc := e.account(1_000 * 1_000_000)
	var ids []string
	for range 6 {
		ids = append(ids, e.legacy(acc, e.receiver(), legacySpec{threshold: 30_000, refill: 65_000}))
	}
	e.startWatcher(20 * time.Millisecond)
	e.startWatcher(20 * time.Millisecond)
	e.waitFor("every subscription refilled", 20*time.Second, func() bool {
		return e.count(`SELECT count(DISTINCT subscription_id) FROM orders`) == len(ids)
	})
	time.Sleep(time.Second) // many more checks by both replicas
	for _, id := range ids {
		if n := e.count(`SELECT count(*) FROM orders WHERE subscription_id = $1`, id); n != 1 {
			t.Errorf("%s: %d orders", id, n)
		}
		if n := len(e.events(id, "subscription.refilled")); n != 1 {
			t.Errorf("%s: %d refilled events", id, n)
		}
		if s := e.sub(id); s.RefillSeq != 1 {
			t.Errorf("%s: refill_seq %d", id, s.RefillSeq)
		}
	}
	if got := e.availableSun(acc); got != 1_000_000_000-int64(len(ids))*3_900_000 {
		t.Fatalf("available %d", got)
	}
}

// Plan billing: the first day is charged at the start, the next one 24 hours later
// (subscription.charged each time, with next_billing_at); a charge that cannot be paid
// pauses the subscription (billing_failed, grace_until, one subscription.paused), and a
// credit within the grace lets the retry charge and resume it. The receiver is not
// activated, so top-ups are refused (3004) and recorded as top_up_failed, never twice in a row.
func TestPlanBillingDailyWithGrace(t *testing.T) {
	e := newEnv(t)
	acc := e.account(13_000_000) // two days of the basic fee and 1 TRX
	key, _ := tron.GenerateKey()
	k := key.Address() // never activated
	id := e.plan(acc, k, autorefill.Rule{Reserve: 131_000, Low: 131_000, High: 131_000})
	start := *e.sub(id).NextBillingAt
	if e.availableSun(acc) != 7_000_000 || len(e.events(id, "subscription.charged")) != 1 {
		t.Fatalf("first day not charged")
	}
	e.startWatcher(100 * time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	if n := len(e.events(id, "subscription.charged")); n != 1 {
		t.Fatalf("%d charges before a day passed", n)
	}

	e.clock.Add(24*time.Hour + time.Second)
	e.waitFor("second day charged", 10*time.Second, func() bool { return len(e.events(id, "subscription.charged")) == 2 })
	ch := e.events(id, "subscription.charged")[1]
	if !sameJSON(ch, map[string]any{"subscription_id": id, "receiver": k.String(), "plan": "basic", "amount_sun": 6_000_000,
		"next_billing_at": start.Add(24 * time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")}) {
		t.Fatalf("second charge %v", ch)
	}
	if e.availableSun(acc) != 1_000_000 {
		t.Fatalf("available %d after two days", e.availableSun(acc))
	}

	e.clock.Add(24 * time.Hour)
	e.waitFor("billing failure", 10*time.Second, func() bool { return e.sub(id).Status == autorefill.Paused })
	time.Sleep(500 * time.Millisecond)
	s := e.sub(id)
	if s.StatusReason == nil || *s.StatusReason != "billing_failed" || s.GraceUntil == nil {
		t.Fatalf("after the failed charge: %+v", s)
	}
	if p := e.events(id, "subscription.paused"); len(p) != 1 || !sameJSON(p[0], map[string]any{"subscription_id": id, "receiver": k.String(), "reason": "billing_failed"}) {
		t.Fatalf("subscription.paused %v", p)
	}
	if n := len(e.events(id, "subscription.charged")); n != 2 {
		t.Fatalf("%d charges", n)
	}

	e.credit(acc, 10_000_000)
	e.waitFor("charge within the grace", 10*time.Second, func() bool { return len(e.events(id, "subscription.charged")) == 3 })
	s = e.sub(id)
	if s.Status != autorefill.Active || s.GraceUntil != nil || !s.NextBillingAt.Equal(start.Add(48*time.Hour)) {
		t.Fatalf("after the retry: %+v", s)
	}
	if got := e.availableSun(acc); got != 5_000_000 {
		t.Fatalf("available %d", got)
	}
	if n := e.count(`SELECT count(*) FROM ledger_postings WHERE kind = 'capture' AND account_id = $1`, acc); n != 3 {
		t.Fatalf("%d fee postings", n)
	}
	// Refused top-ups are recorded, but never twice in a row (GET shows only the last 20).
	if n := e.count(`SELECT count(*) FROM subscription_events WHERE subscription_id = $1 AND kind = 'top_up_failed'`, id); n == 0 {
		t.Fatal("no top_up_failed history row")
	}
	if n := e.count(`SELECT count(*) FROM (SELECT kind, lag(kind) OVER (ORDER BY seq) AS prev FROM subscription_events
		WHERE subscription_id = $1) h WHERE kind = 'top_up_failed' AND prev = 'top_up_failed'`, id); n != 0 {
		t.Fatalf("%d repeated top_up_failed rows", n)
	}
}

// A plan tops the address up to high with a 1 h order; once what it has delegated at once
// would exceed the reserve, it pauses with reserve_exhausted instead of ordering.
func TestPlanTopUpAndReserveExhausted(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(1_000 * 1_000_000)
	recv := e.receiver()
	id := e.plan(acc, recv, autorefill.Rule{Reserve: 200_000, Low: 65_000, High: 131_000})
	e.startWatcher(100 * time.Millisecond)
	e.waitFor("top-up delivered", 30*time.Second, func() bool {
		s := e.sub(id)
		return s.LastOrderID != nil && (e.orderStatus(*s.LastOrderID) == "confirmed" || e.orderStatus(*s.LastOrderID) == "active")
	})
	ref := e.events(id, "subscription.refilled")
	if len(ref) != 1 || ref[0]["amount"] != 131_000.0 || ref[0]["tier"] != "1h" || ref[0]["threshold_amount"] != 65_000.0 || ref[0]["trigger_available"] != 0.0 {
		t.Fatalf("top-up %v", ref)
	}
	// 131,000 delegated; the address spends most of it: a top-up to high would need about
	// 121,000 more, beyond the reserve of 200,000.
	e.useEnergy(recv, e.energy(recv)-10_000)
	e.waitFor("reserve exhausted", 10*time.Second, func() bool { return e.sub(id).Status == autorefill.Paused })
	time.Sleep(300 * time.Millisecond)
	if p := e.events(id, "subscription.paused"); len(p) != 1 || p[0]["reason"] != "reserve_exhausted" {
		t.Fatalf("subscription.paused %v", p)
	}
	if n := e.count(`SELECT count(*) FROM orders WHERE subscription_id = $1`, id); n != 1 {
		t.Fatalf("%d orders", n)
	}
}

// sameJSON compares decoded JSON with a Go literal by their JSON forms.
func sameJSON(got map[string]any, want map[string]any) bool {
	return fmt.Sprint(normalise(got)) == fmt.Sprint(normalise(want))
}

func normalise(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		switch n := v.(type) {
		case int:
			out[k] = fmt.Sprint(float64(n))
		case int64:
			out[k] = fmt.Sprint(float64(n))
		default:
			out[k] = fmt.Sprint(n)
		}
	}
	return out
}

// A renewal subscription orders at once when it has no standing rental, then re-orders
// only when the standing rental is within the renewal lead of its end, whatever the free
// energy.
func TestRenewalReordersBeforeTheRentalEnds(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(1_000 * 1_000_000)
	recv := e.receiver()
	id := e.legacy(acc, recv, legacySpec{mode: autorefill.Renewal, threshold: 0, refill: 65_000})
	e.startWatcher(100 * time.Millisecond)
	var expires time.Time
	e.waitFor("first rental active", 30*time.Second, func() bool {
		s := e.sub(id)
		if s.LastOrderID == nil {
			return false
		}
		var st string
		var exp *time.Time
		if err := e.db.Pool.QueryRow(context.Background(), `SELECT status, expires_at FROM orders WHERE id = $1`, *s.LastOrderID).Scan(&st, &exp); err != nil {
			t.Fatal(err)
		}
		if exp != nil {
			expires = *exp
		}
		return st == "active" && exp != nil
	})
	time.Sleep(500 * time.Millisecond)
	if n := len(e.events(id, "subscription.refilled")); n != 1 {
		t.Fatalf("%d refills while the rental has most of its hour left", n)
	}
	// Move the watcher to 30 s before the rental ends (the lead is 1 minute).
	e.clock.Add(time.Until(expires) - 30*time.Second)
	e.waitFor("renewal", 10*time.Second, func() bool { return len(e.events(id, "subscription.refilled")) == 2 })
	second := e.events(id, "subscription.refilled")[1]
	if second["amount"] != 65_000.0 || second["order_id"] == e.events(id, "subscription.refilled")[0]["order_id"] {
		t.Fatalf("renewal %v", second)
	}
	if n := e.count(`SELECT count(*) FROM orders WHERE subscription_id = $1`, id); n != 2 {
		t.Fatalf("%d orders", n)
	}
}

// A suspended account reads only: its subscriptions place nothing until support
// unsuspends it.
func TestSuspendedAccountIsNotRefilled(t *testing.T) {
	e := newEnv(t)
	acc := e.account(100_000_000)
	if _, err := e.db.Pool.Exec(context.Background(), `UPDATE accounts SET status = 'suspended' WHERE id = $1`, acc); err != nil {
		t.Fatal(err)
	}
	id := e.legacy(acc, e.receiver(), legacySpec{threshold: 30_000, refill: 65_000})
	e.startWatcher(100 * time.Millisecond)
	time.Sleep(time.Second)
	if n := e.count(`SELECT count(*) FROM orders`); n != 0 || e.sub(id).Status != autorefill.Active {
		t.Fatalf("%d orders for a suspended account, status %s", n, e.sub(id).Status)
	}
	if _, err := e.db.Pool.Exec(context.Background(), `UPDATE accounts SET status = 'active' WHERE id = $1`, acc); err != nil {
		t.Fatal(err)
	}
	e.waitFor("refill after unsuspending", 10*time.Second, func() bool { return len(e.events(id, "subscription.refilled")) == 1 })
}

// A bandwidth subscription reads the address's free bandwidth (daily allowance and staked
// limit) and refills bandwidth; its history row carries no energy delta.
func TestBandwidthRefill(t *testing.T) {
	e := newEnv(t)
	acc := e.account(100_000_000)
	recv := e.receiver()
	id := e.legacy(acc, recv, legacySpec{resource: "bandwidth", threshold: 10_000, refill: 5_000})
	e.startWatcher(100 * time.Millisecond)
	e.waitFor("bandwidth refill", 10*time.Second, func() bool { return len(e.events(id, "subscription.refilled")) == 1 })
	ev := e.events(id, "subscription.refilled")[0]
	r, err := e.node.GetAccountResource(context.Background(), recv)
	if err != nil {
		t.Fatal(err)
	}
	if ev["resource"] != "bandwidth" || ev["amount"] != 5_000.0 || ev["trigger_available"] != float64(r.FreeNetLimit-r.FreeNetUsed+r.NetLimit-r.NetUsed) {
		t.Fatalf("refill %v, node %+v", ev, r)
	}
	var res string
	var delta *int64
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT o.resource, h.energy_delta FROM subscription_events h JOIN orders o ON o.id = h.order_id
		WHERE h.subscription_id = $1 AND h.kind = 'refill'`, id).Scan(&res, &delta); err != nil {
		t.Fatal(err)
	}
	if res != "bandwidth" || delta != nil {
		t.Fatalf("order resource %s, energy_delta %v", res, delta)
	}
}

// crashingPlacer places through real order acceptance and then fails as a crash between
// the placement and the commit would: the check's transaction rolls back.
type crashingPlacer struct {
	inner   subscriptions.Placer
	crashes atomic.Int32
}

func (c *crashingPlacer) PlaceTx(ctx context.Context, tx pgx.Tx, accountID string, r acceptance.Placement) (orders.Record, error) {
	p, err := c.inner.PlaceTx(ctx, tx, accountID, r)
	if err == nil && c.crashes.Add(-1) >= 0 {
		return orders.Record{}, errors.New("injected crash after placing " + p.ID)
	}
	return p, err
}

// A check that dies after placing its refill (before committing) leaves nothing behind,
// and the retry places the refill under the same client_order_id, once.
func TestCheckCrashAfterPlacementRetriesTheSameRefill(t *testing.T) {
	e := newEnv(t)
	acc := e.account(100_000_000)
	id := e.legacy(acc, e.receiver(), legacySpec{threshold: 30_000, refill: 65_000})
	cp := &crashingPlacer{inner: e.placer}
	cp.crashes.Store(2)
	w, err := subscriptions.New(subscriptions.Options{Pool: e.db.Pool, Chain: e.node, Placer: cp, Ledger: e.ledger,
		CheckEvery: time.Hour, Now: e.clock.Now, Logger: quiet(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 2 {
		if _, err := w.Sweep(ctx); err == nil {
			t.Fatalf("sweep %d: the injected crash was not reported", i)
		}
		if n := e.count(`SELECT count(*) FROM orders`); n != 0 || e.availableSun(acc) != 100_000_000 || len(e.events(id, "subscription.refilled")) != 0 {
			t.Fatalf("after crash %d: %d orders, available %d", i, n, e.availableSun(acc))
		}
		if s := e.sub(id); s.RefillSeq != 0 || s.LastOrderID != nil {
			t.Fatalf("after crash %d: %+v", i, s)
		}
	}
	if n, err := w.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep after the crashes: %d, %v", n, err)
	}
	var coid string
	if err := e.db.Pool.QueryRow(ctx, `SELECT client_order_id FROM orders WHERE subscription_id = $1`, id).Scan(&coid); err != nil {
		t.Fatal(err)
	}
	if coid != id+":r1" || len(e.events(id, "subscription.refilled")) != 1 || e.availableSun(acc) != 100_000_000-3_900_000 {
		t.Fatalf("client_order_id %s, %d refilled events, available %d", coid, len(e.events(id, "subscription.refilled")), e.availableSun(acc))
	}
	// Not due again for an hour: another sweep checks nothing.
	if n, err := w.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second sweep: %d, %v", n, err)
	}
}
