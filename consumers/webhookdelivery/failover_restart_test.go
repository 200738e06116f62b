package webhookdelivery_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/consumers/webhookdelivery"
	"rental/infra/webhooks"
)

func (e *env) startCancelable(t *testing.T, delays []time.Duration) (cancel func(), done chan error) {
	d, err := webhookdelivery.New(webhookdelivery.Options{
		Brokers: []string{e.broker}, Store: e.store, Brand: testBrand, Delays: delays,
		Policy:     webhooks.Policy{AllowLoopback: true},
		Logger:     quiet(),
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(50 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, c := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	return c, done
}

// A shutdown during the first backup attempt after a failover: after the restart the
// primary's redelivered wake-up is stale, and the backup attempt (which no wake-up names)
// must still be made from the queue's head.
func TestFailoverInterruptedByShutdownIsDeliveredAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/primary")
	e.endpoint(t, webhooks.RoleBackup, "/backup")
	var phase atomic.Int32 // 0: backup blocks, 1: everything 200 on backup
	hit := make(chan struct{}, 1)
	e.rcv.Answer = func(r received) int {
		if r.Path == "/primary" {
			return 500
		}
		if phase.Load() == 0 {
			select {
			case hit <- struct{}{}:
			default:
			}
			time.Sleep(2 * time.Second)
			return 500
		}
		return 200
	}
	ev := e.publish(t, "balance.credited", map[string]any{"reason": "deposit", "amount_sun": 1})
	delays := []time.Duration{100 * time.Millisecond} // 2 attempts per endpoint
	cancel1, done1 := e.startCancelable(t, delays)
	select {
	case <-hit:
	case <-time.After(30 * time.Second):
		t.Fatal("backup never hit")
	}
	cancel1() // SIGTERM while the first backup attempt is in flight
	if err := <-done1; err != nil {
		t.Logf("deliverer 1: %v", err)
	}
	phase.Store(1)
	var role string
	var attempt int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT role, attempt FROM webhook_queue WHERE event_id=$1`, ev.EventID).Scan(&role, &attempt); err != nil || role != webhooks.RoleBackup {
		t.Fatalf("queue after the shutdown: role %q attempt %d (%v), want the backup's turn", role, attempt, err)
	}

	cancel2, done2 := e.startCancelable(t, delays)
	defer func() { cancel2(); <-done2 }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range e.rcv.requests() {
			if r.Path == "/backup" && r.Answered == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	role, attempt = "", -1
	err := e.db.Pool.QueryRow(context.Background(), `SELECT role, attempt FROM webhook_queue WHERE event_id=$1`, ev.EventID).Scan(&role, &attempt)
	t.Errorf("event %s never delivered after restart; queue row: role=%s attempt=%d err=%v; requests=%d", ev.EventID, role, attempt, err, len(e.rcv.requests()))
}

// Delivery history is pruned past its retention, and only past it.
func TestDeliveryHistoryIsPruned(t *testing.T) {
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/primary")
	e.rcv.Answer = func(received) int { return 200 }
	old := e.publish(t, "balance.credited", map[string]any{"reason": "deposit", "amount_sun": 1})
	fresh := e.publish(t, "balance.credited", map[string]any{"reason": "deposit", "amount_sun": 2})
	cancel, done := e.startCancelable(t, []time.Duration{100 * time.Millisecond})
	defer func() { cancel(); <-done }()
	ctx := context.Background()
	count := func(id string) (n int) {
		_ = e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE event_id = $1`, id).Scan(&n)
		return n
	}
	for deadline := time.Now().Add(20 * time.Second); count(old.EventID) == 0 || count(fresh.EventID) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("events not delivered")
		}
	}
	if _, err := e.db.Pool.Exec(ctx, `UPDATE webhook_deliveries SET attempted_at = now() - interval '36 days' WHERE event_id = $1`, old.EventID); err != nil {
		t.Fatal(err)
	}
	n, err := e.store.PruneHistory(ctx, webhooks.HistoryRetention)
	if err != nil || n != 1 || count(old.EventID) != 0 || count(fresh.EventID) != 1 {
		t.Fatalf("pruned %d (%v); rows left: old %d, fresh %d", n, err, count(old.EventID), count(fresh.EventID))
	}
}
