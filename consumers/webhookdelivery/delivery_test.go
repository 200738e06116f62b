package webhookdelivery_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/webhooks"
)

// Every event reaches the endpoint signed, with every header, the events of each order in
// the order they happened, and the delivery history shows each attempt.
func TestDeliversEveryEventSignedAndInOrder(t *testing.T) {
	e := newEnv(t)
	primary := e.endpoint(t, webhooks.RolePrimary, "/hook")
	e.start(t, scaled(100*time.Millisecond))

	types := []string{"order.confirmed", "order.reclaimed", "order.refunded", "order.expired"}
	const orders = 6
	var ids []string
	for seq := range types {
		for o := 0; o < orders; o++ {
			env := e.publish(t, types[seq], map[string]any{"order_id": "ord_" + string(rune('a'+o)), "seq": seq, "tier": "1h"})
			ids = append(ids, env.EventID)
		}
	}
	// Events of the other topics, each type of the spec.
	for _, typ := range []string{"balance.credited", "balance.low", "deposit_address.rotated"} {
		ids = append(ids, e.publish(t, typ, map[string]any{"reason": "deposit"}).EventID)
	}
	for _, typ := range []string{"subscription.refilled", "subscription.suspended", "subscription.paused", "subscription.charged"} {
		ids = append(ids, e.publish(t, typ, map[string]any{"subscription_id": "sub_1"}).EventID)
	}
	ids = append(ids, e.publish(t, "batch.completed", map[string]any{"batch_id": "bat_1"}).EventID)
	ids = append(ids, e.publish(t, "order.failed", map[string]any{"order_id": "ord_f", "tier": "5m"}).EventID)

	waitFor(t, 30*time.Second, "every event delivered", func() bool { return len(e.rcv.requests()) >= len(ids) })
	got := e.rcv.requests()
	seen := map[string]int{}
	last := map[string]int{}
	for _, r := range got {
		seen[r.EventID]++
		if r.Attempt != 1 {
			t.Errorf("%s: attempt %d, want 1 (the receiver never failed)", r.EventID, r.Attempt)
		}
		if r.OrderID != "" && r.EventType != "order.failed" {
			if prev, ok := last[r.OrderID]; ok && r.Seq < prev {
				t.Errorf("order %s: event seq %d arrived after seq %d", r.OrderID, r.Seq, prev)
			}
			last[r.OrderID] = r.Seq
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("event %s delivered %d times, want once", id, seen[id])
		}
	}
	// History: one succeeded attempt per event on the primary. An attempt's history row is
	// written after the receiver answered, so the last rows may land just after the last POST.
	var ds []webhooks.Delivery
	waitFor(t, 10*time.Second, "every attempt in the history", func() bool {
		var err error
		ds, _, err = e.store.Deliveries(context.Background(), e.account, primary.ID, 200, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(ds) >= len(ids)
	})
	if len(ds) != len(ids) {
		t.Fatalf("history has %d attempts, want %d", len(ds), len(ids))
	}
	for _, d := range ds {
		if d.Status != "succeeded" || d.Next != "done" || d.Attempt != 1 || d.HTTPStatus == nil || *d.HTTPStatus != 200 {
			t.Errorf("history row %+v", d)
		}
	}
}

// A failing endpoint gets attempts 1 to 10 at the schedule's offsets (compressed), the same
// event id every time and a new delivery id each time, then the event is dead-lettered.
func TestRetriesFollowTheScheduleThenDeadLetter(t *testing.T) {
	e := newEnv(t)
	primary := e.endpoint(t, webhooks.RolePrimary, "/down")
	e.rcv.Answer = func(received) int { return 503 }
	delays := scaled(100 * time.Millisecond) // 100 ms, 200 ms, ... 900 ms
	e.start(t, delays)

	env := e.publish(t, "order.confirmed", map[string]any{"order_id": orderID(1), "tier": "1h"})
	waitFor(t, 30*time.Second, "ten attempts", func() bool { return len(e.rcv.requests()) >= 10 })
	waitFor(t, 10*time.Second, "the dead letter", func() bool { _, ok := e.deadLetters(t)[env.EventID]; return ok })
	time.Sleep(300 * time.Millisecond) // nothing more may come
	got := e.rcv.requests()
	if len(got) != 10 {
		t.Fatalf("%d attempts, want 10", len(got))
	}
	for i, r := range got {
		if r.EventID != env.EventID || r.Attempt != i+1 {
			t.Errorf("request %d: event %s attempt %d", i, r.EventID, r.Attempt)
		}
		if i == 0 {
			continue
		}
		gap := r.At.Sub(got[i-1].At)
		t.Logf("attempt %d: %s after attempt %d (schedule %s)", i+1, gap.Round(time.Millisecond), i, delays[i-1])
		if gap < delays[i-1] || gap > delays[i-1]+2*time.Second {
			t.Errorf("attempt %d came %s after attempt %d; the schedule says %s", i+1, gap, i, delays[i-1])
		}
	}
	dl := e.deadLetters(t)[env.EventID]
	if dl["attempts"] != "10" || dl["role"] != "primary" || dl["reason"] != "exhausted" {
		t.Errorf("dead letter headers %v", dl)
	}
	ds, _, err := e.store.Deliveries(context.Background(), e.account, primary.ID, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 10 || ds[0].Next != "dead" || ds[0].Attempt != 10 || ds[9].Next != "retry" || ds[9].NextAttemptAt == nil {
		t.Errorf("history (newest first): %d rows, first %+v", len(ds), ds[0])
	}
}

// Events of a 5m-tier order stop after attempt 4.
func TestShortTierStopsAfterAttemptFour(t *testing.T) {
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/down")
	e.rcv.Answer = func(received) int { return 500 }
	e.start(t, scaled(50*time.Millisecond))

	env := e.publish(t, "order.confirmed", map[string]any{"order_id": orderID(1), "tier": "5m"})
	// order.expired carries no tier in the spec: the order record tells.
	expiredOrder := orderID(2)
	if _, err := e.db.Pool.Exec(context.Background(), `INSERT INTO orders (id, account_id, network, client_order_id, status,
			resource, amount, receiver, unit_price_centi, energy_amount_sun, total_amount_sun, charged_amount_sun, tier)
		VALUES ($1, $2, 'nile', 'c1', 'expired', 'energy', 65000, 'TTest', 0, 0, 0, 0, '5m')`, expiredOrder, e.account); err != nil {
		t.Fatalf("an order row (schema of migration 00010): %v", err)
	}
	expired := e.publish(t, "order.expired", map[string]any{"order_id": expiredOrder})
	waitFor(t, 20*time.Second, "the dead letters", func() bool {
		dl := e.deadLetters(t)
		_, a := dl[env.EventID]
		_, b := dl[expired.EventID]
		return a && b
	})
	time.Sleep(500 * time.Millisecond)
	per := map[string]int{}
	for _, r := range e.rcv.requests() {
		per[r.EventID]++
	}
	if per[env.EventID] != 4 || per[expired.EventID] != 4 {
		t.Fatalf("attempts for 5m-tier orders: %d (data.tier) and %d (order record), want 4 each", per[env.EventID], per[expired.EventID])
	}
	if dl := e.deadLetters(t)[env.EventID]; dl["attempts"] != "4" {
		t.Errorf("dead letter %v", dl)
	}
}

// When the primary is exhausted the schedule restarts on the backup, signed with the
// backup's own secret, with the same event id; when the backup is exhausted too the
// event is dead.
func TestFailoverToBackupWithItsOwnSecretThenDead(t *testing.T) {
	e := newEnv(t)
	primary := e.endpoint(t, webhooks.RolePrimary, "/primary")
	backup := e.endpoint(t, webhooks.RoleBackup, "/backup")
	if primary.Secret == backup.Secret {
		t.Fatal("primary and backup share a secret")
	}
	saved := e.publish(t, "order.confirmed", map[string]any{"order_id": orderID(1), "tier": "1h"})
	lost := e.publish(t, "order.confirmed", map[string]any{"order_id": orderID(2), "tier": "5m"})
	e.rcv.Answer = func(r received) int {
		if r.Path == "/backup" && r.EventID == saved.EventID {
			return 204
		}
		return 500
	}
	e.start(t, scaled(30*time.Millisecond))

	waitFor(t, 30*time.Second, "both outcomes", func() bool {
		dl := e.deadLetters(t)
		_, dead := dl[lost.EventID]
		n := 0
		for _, r := range e.rcv.requests() {
			if r.EventID == saved.EventID && r.Path == "/backup" {
				n++
			}
		}
		return dead && n == 1
	})
	time.Sleep(300 * time.Millisecond)
	count := map[string][]int{}
	for _, r := range e.rcv.requests() {
		count[r.EventID+r.Path] = append(count[r.EventID+r.Path], r.Attempt)
	}
	want := map[string][]int{
		saved.EventID + "/primary": {1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
		saved.EventID + "/backup":  {1},
		lost.EventID + "/primary":  {1, 2, 3, 4},
		lost.EventID + "/backup":   {1, 2, 3, 4},
	}
	for k, w := range want {
		if !slices.Equal(count[k], w) {
			t.Errorf("%s: attempts %v, want %v", k, count[k], w)
		}
	}
	if dl := e.deadLetters(t); dl[lost.EventID]["role"] != "backup" {
		t.Errorf("dead letter of the 5m order: %v", dl[lost.EventID])
	} else if _, ok := dl[saved.EventID]; ok {
		t.Error("the event the backup took was dead-lettered too")
	}
	ds, _, err := e.store.Deliveries(context.Background(), e.account, backup.ID, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 5 {
		t.Errorf("backup history: %d attempts, want 5", len(ds))
	}
}

// While an earlier event of an order is being retried, the order's later events wait
// behind it; other orders are not held up.
func TestLaterEventsOfAnOrderWaitForTheEarlierOne(t *testing.T) {
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/hook")
	slow, other := orderID(1), orderID(2)
	first := e.publish(t, "order.confirmed", map[string]any{"order_id": slow, "seq": 0, "tier": "1h"})
	fails := 0
	e.rcv.Answer = func(r received) int {
		if r.EventID == first.EventID && fails < 2 {
			fails++
			return 500
		}
		return 200
	}
	for seq := 1; seq <= 3; seq++ {
		e.publish(t, "order.expired", map[string]any{"order_id": slow, "seq": seq})
	}
	e.publish(t, "order.confirmed", map[string]any{"order_id": other, "seq": 0})
	e.start(t, scaled(200*time.Millisecond))

	waitFor(t, 20*time.Second, "all events", func() bool { return len(e.rcv.requests()) >= 7 })
	var seqs []int
	var otherAt, firstOK time.Time
	for _, r := range e.rcv.requests() {
		if r.OrderID == slow {
			seqs = append(seqs, r.Seq)
			if r.EventID == first.EventID && r.Answered == 200 {
				firstOK = r.At
			}
		} else {
			otherAt = r.At
		}
	}
	if !slices.Equal(seqs, []int{0, 0, 0, 1, 2, 3}) {
		t.Errorf("order %s: events arrived in seq order %v, want [0 0 0 1 2 3]", slow, seqs)
	}
	if !otherAt.Before(firstOK) {
		t.Error("the other order waited for the failing one")
	}
}

// A rotated secret signs the very next attempt of a delivery already being retried.
func TestRotatedSecretSignsTheNextRetry(t *testing.T) {
	e := newEnv(t)
	ep := e.endpoint(t, webhooks.RolePrimary, "/hook")
	e.rcv.Answer = func(r received) int {
		if r.Attempt < 3 {
			return 500
		}
		return 200
	}
	e.start(t, scaled(300*time.Millisecond))
	env := e.publish(t, "order.confirmed", map[string]any{"order_id": orderID(1), "tier": "1h"})
	waitFor(t, 10*time.Second, "attempt 2", func() bool { return len(e.rcv.requests()) >= 2 })
	var rotated webhooks.Target
	if err := e.store.InTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		rotated, err = e.store.RotateSecret(context.Background(), tx, e.account, ep.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.rcv.setSecret("/hook", rotated.Secret) // the receiver now refuses the old secret
	waitFor(t, 10*time.Second, "attempt 3", func() bool { return len(e.rcv.requests()) >= 3 })
	got := e.rcv.requests()
	if got[2].EventID != env.EventID || got[2].Attempt != 3 || got[2].Answered != 200 {
		t.Errorf("third request %+v", got[2])
	}
}

// Deleting an endpoint drops what was still to be delivered to it.
func TestDeleteDropsUndeliveredEvents(t *testing.T) {
	e := newEnv(t)
	ep := e.endpoint(t, webhooks.RolePrimary, "/hook")
	e.rcv.Answer = func(received) int { return 500 }
	e.start(t, scaled(300*time.Millisecond))
	order := orderID(1)
	first := e.publish(t, "order.confirmed", map[string]any{"order_id": order, "tier": "1h"})
	e.publish(t, "order.expired", map[string]any{"order_id": order}) // waits behind the first
	waitFor(t, 10*time.Second, "attempt 2", func() bool { return len(e.rcv.requests()) >= 2 })
	if err := e.store.Delete(context.Background(), e.account, ep.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // attempt 3 was due 600 ms after attempt 2
	if n := len(e.rcv.requests()); n != 2 {
		t.Errorf("%d requests, want the 2 made before the delete", n)
	}
	var queued int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_queue`).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if queued != 0 {
		t.Errorf("%d deliveries still queued", queued)
	}
	if _, dead := e.deadLetters(t)[first.EventID]; dead {
		t.Error("a dropped event was dead-lettered")
	}
}
