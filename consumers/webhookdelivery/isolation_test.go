package webhookdelivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/consumers/webhookdelivery"
	"rental/infra/kafka"
	"rental/infra/webhooks"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/topics"
)

// secondAccount registers another account with a primary endpoint at path.
func (e *env) secondAccount(t *testing.T, path string) string {
	t.Helper()
	acc := newAccount(t, e.db)
	var tg webhooks.Target
	if err := e.store.InTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		tg, err = e.store.Create(context.Background(), tx, acc, webhooks.NewEndpoint{URL: e.rcv.url(path), Role: webhooks.RolePrimary})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.rcv.setSecret(path, tg.Secret)
	return acc
}

// publishOrder puts an order event of account on the order topic, on partition p when
// p >= 0 (else where its key hashes); it returns the partition it landed on.
func (e *env) publishOrder(t *testing.T, account, eventType, order string, p int32) (events.Envelope, int32) {
	t.Helper()
	env, err := events.New(eventType, account, network.Nile, map[string]any{"order_id": order, "tier": "1h"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(env)
	r := &kgo.Record{Topic: topics.OrderEvents.Name, Key: []byte(order), Value: b}
	cl := e.prod
	if p >= 0 {
		r.Partition = p
		mp, err := kafka.NewClient([]string{e.broker}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer mp.Close()
		cl = mp
	}
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return env, r.Partition
}

// arrival is when the first request for eventID (with attempt n, 0 = any) arrived.
func (e *env) arrival(eventID string, n int) (time.Time, bool) {
	for _, r := range e.rcv.requests() {
		if r.EventID == eventID && (n == 0 || r.Attempt == n) {
			return r.At, true
		}
	}
	return time.Time{}, false
}

// The reviewer's scenario: account A's endpoint answers 200 after 2 s, account B's at
// once, and B's event lands on the order topic behind many of A's on the same partition.
// B's event must reach B without waiting for A's attempts (when the attempts ran on the
// partition's worker it waited for every A event ahead of it: 2 s each).
func TestSlowAccountDoesNotDelayOtherAccounts(t *testing.T) {
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/a") // account A = e.account
	accB := e.secondAccount(t, "/b")
	e.rcv.Answer = func(r received) int {
		if r.Path == "/a" {
			time.Sleep(2 * time.Second)
		}
		return 200
	}
	e.start(t, scaled(100*time.Millisecond))
	// Warm-up: the consumer group has joined once B's first event is delivered.
	warm, _ := e.publishOrder(t, accB, "order.confirmed", orderID(0), -1)
	waitFor(t, 30*time.Second, "the warm-up delivery", func() bool { _, ok := e.arrival(warm.EventID, 1); return ok })

	const slow = 48
	parts := map[int32]int{}
	var aIDs []string
	for i := 0; i < slow; i++ {
		env, p := e.publishOrder(t, e.account, "order.confirmed", fmt.Sprintf("ordA_%d_%d", time.Now().UnixNano(), i), -1)
		parts[p]++
		aIDs = append(aIDs, env.EventID)
	}
	busiest, ahead := int32(0), 0
	for p, n := range parts {
		if n > ahead {
			busiest, ahead = p, n
		}
	}
	published := time.Now()
	evB, _ := e.publishOrder(t, accB, "order.confirmed", orderID(1), busiest)
	waitFor(t, 30*time.Second, "B's event delivered", func() bool { _, ok := e.arrival(evB.EventID, 1); return ok })
	at, _ := e.arrival(evB.EventID, 1)
	took := at.Sub(published)
	t.Logf("B's event reached B %s after publish, behind %d of A's events on partition %d", took.Round(time.Millisecond), ahead, busiest)
	if took > time.Second {
		t.Errorf("B's event took %s to reach B's instant endpoint; A's slow endpoint held it up", took)
	}
	// A's events are delivered too, several at a time.
	waitFor(t, 30*time.Second, "A's events delivered", func() bool {
		for _, id := range aIDs {
			if _, ok := e.arrival(id, 1); !ok {
				return false
			}
		}
		return true
	})
}

// The same for retries: A's wake-ups fill the retry topic's partitions and each of A's
// second attempts takes 2 s; B's second attempt must still come at its due time.
func TestSlowAccountDoesNotDelayOtherAccountsRetries(t *testing.T) {
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/a")
	accB := e.secondAccount(t, "/b")
	e.rcv.Answer = func(r received) int {
		switch {
		case r.Path == "/b" && r.Attempt == 1:
			return 500
		case r.Path == "/b":
			return 200
		case r.Attempt > 1:
			time.Sleep(2 * time.Second)
		}
		return 500
	}
	delays := scaled(100 * time.Millisecond)
	e.start(t, delays)
	// 96 orders: with 12 partitions per topic, B's wake-up almost surely shares its
	// partition with some of A's.
	const slow = 96
	for i := 0; i < slow; i++ {
		e.publishOrder(t, e.account, "order.confirmed", fmt.Sprintf("ordA_%d_%d", time.Now().UnixNano(), i), -1)
	}
	waitFor(t, 30*time.Second, "A's second attempts under way", func() bool {
		n := 0
		for _, r := range e.rcv.requests() {
			if r.Path == "/a" && r.Attempt == 1 {
				n++
			}
		}
		return n == slow
	})
	evB, _ := e.publishOrder(t, accB, "order.confirmed", orderID(1), -1)
	waitFor(t, 30*time.Second, "B's second attempt", func() bool { _, ok := e.arrival(evB.EventID, 2); return ok })
	first, _ := e.arrival(evB.EventID, 1)
	second, _ := e.arrival(evB.EventID, 2)
	gap := second.Sub(first)
	t.Logf("B's attempt 2 came %s after attempt 1 (schedule %s)", gap.Round(time.Millisecond), delays[0])
	if gap < delays[0] || gap > delays[0]+time.Second {
		t.Errorf("B's attempt 2 came %s after attempt 1; the schedule says %s and A's slow attempts must not delay it", gap, delays[0])
	}
}

// Deliveries in the queue that nothing drives (their driver died after the offset that
// caused them was committed: a new event, an attempt whose lease ran out, a retry whose
// wake-up was consumed) are found by the sweep and delivered, at the attempt they are at.
func TestSweepDrivesOrphanedDeliveries(t *testing.T) {
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/hook")
	ctx := context.Background()
	body := func(id string) []byte {
		env, _ := events.New("balance.credited", e.account, network.Nile, map[string]any{"reason": "deposit"})
		env.EventID = id
		b, _ := json.Marshal(env)
		return b
	}
	ids := []string{"evt_orphan_new", "evt_orphan_leased", "evt_orphan_retry", "evt_orphan_later"}
	for _, id := range ids {
		if err := e.store.Enqueue(ctx, webhooks.Item{AccountID: e.account, OKey: id, EventID: id, EventType: "balance.credited",
			Body: body(id), MaxAttempts: 10, Role: webhooks.RolePrimary}); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`UPDATE webhook_queue SET due_at = now() - interval '1 minute' WHERE event_id = 'evt_orphan_new'`,
		`UPDATE webhook_queue SET due_at = now() - interval '1 minute', claim_attempt = 1, claim_until = now() - interval '1 second' WHERE event_id = 'evt_orphan_leased'`,
		`UPDATE webhook_queue SET due_at = now() - interval '1 minute', attempt = 2 WHERE event_id = 'evt_orphan_retry'`,
		`UPDATE webhook_queue SET due_at = now() + interval '1 hour', attempt = 2 WHERE event_id = 'evt_orphan_later'`,
	} {
		if _, err := e.db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	d, err := webhookdelivery.New(webhookdelivery.Options{
		Brokers: []string{e.broker}, Store: e.store, Brand: testBrand, Delays: scaled(100 * time.Millisecond),
		Policy: webhooks.Policy{AllowLoopback: true}, Logger: quiet(), SweepEvery: 100 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(50 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 15*time.Second, "the orphaned deliveries", func() bool {
		for _, id := range ids[:3] {
			if _, ok := e.arrival(id, 0); !ok {
				return false
			}
		}
		return true
	})
	want := map[string]int{"evt_orphan_new": 1, "evt_orphan_leased": 1, "evt_orphan_retry": 3}
	for _, r := range e.rcv.requests() {
		if r.EventID == "evt_orphan_later" {
			t.Error("a delivery whose next attempt is not due yet was sent")
		} else if r.Attempt != want[r.EventID] {
			t.Errorf("%s: attempt %d, want %d", r.EventID, r.Attempt, want[r.EventID])
		}
	}
	// The receiver answers before the deliverer records the outcome: give it a moment.
	var left int
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_queue`).Scan(&left)
		if err == nil && left == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries left in the queue (%v), want only the one not due", left, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
