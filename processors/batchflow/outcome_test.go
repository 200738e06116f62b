package batchflow

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/acceptance"
	"rental/infra/batchstore"
	"rental/infra/orderstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/batches"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// Outcome recording against real Postgres: three placed receivers whose orders end
// confirmed, confirmed with a partial delivery and failed. The order rows are brought to
// those states with the columns the order processor sets (processors/orderflow has its own
// tests of how it gets there); what is tested here is that the batch learns each outcome
// exactly once, from redelivered events, concurrent handlers and the sweep, and ends with
// one batch.completed carrying what the orders finally charged.

type noPlacer struct{ t *testing.T }

func (p noPlacer) PlaceTx(context.Context, pgx.Tx, string, acceptance.Placement) (orders.Record, error) {
	p.t.Error("nothing is pending; the placer must not be called")
	return orders.Record{}, nil
}

func TestOrderOutcomesEndTheBatchOnce(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	acc := events.NewID("acc")
	owner, _ := tron.GenerateKey()
	if _, err := db.Pool.Exec(ctx, `INSERT INTO accounts (id, network, owner_address, status) VALUES ($1, 'nile', $2, 'active')`,
		acc, owner.Address().String()); err != nil {
		t.Fatal(err)
	}
	amount := int64(10_000)
	nb := batchstore.NewBatch{ID: batchstore.NewID(), AccountID: acc, Network: network.Nile, ClientBatchID: "outcomes",
		Resource: "energy", Tier: "1h", Amount: &amount, CreatedAt: time.Now()}
	for range 3 {
		k, _ := tron.GenerateKey()
		nb.Receivers = append(nb.Receivers, batchstore.NewReceiver{Receiver: k.Address().String(), Amount: amount})
	}
	const price = 600_000
	orderIDs := make([]string, 3)
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if err := batchstore.Insert(ctx, tx, nb); err != nil {
			return err
		}
		for i, r := range nb.Receivers {
			tier, secs := "1h", int64(3600)
			row, err := orderstore.Insert(ctx, tx, orderstore.NewOrder{ID: orderstore.NewID(), AccountID: acc, Network: network.Nile,
				ClientOrderID: fmt.Sprintf("%s:%d", nb.ID, i), BatchID: &nb.ID, Resource: orders.Energy, Amount: amount,
				Tier: &tier, DurationSeconds: &secs, Receiver: r.Receiver, UnitPriceCenti: 6000, EnergyAmountSun: price,
				CreatedAt: time.Now()})
			if err != nil {
				return err
			}
			orderIDs[i] = row.ID
			if err := batchstore.MarkPlaced(ctx, tx, nb.ID, i, row.ID, time.Now()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Options{Pool: db.Pool, Placer: noPlacer{t}, Registerer: prometheus.NewRegistry(), SweepEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	event := func(typ, orderID string, batchID *string) *kgo.Record {
		env, err := events.New(typ, acc, network.Nile, map[string]any{"order_id": orderID, "batch_id": batchID})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(env)
		return &kgo.Record{Value: b}
	}
	state := func(i int) string {
		var s string
		if err := db.Pool.QueryRow(ctx, `SELECT state FROM batch_receivers WHERE batch_id = $1 AND idx = $2`, nb.ID, i).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	completed := func() int {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE topic = 'events.batches.v1' AND key = $1`, nb.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec := func(sql string, args ...any) {
		if _, err := db.Pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}

	// An event of an order not decided yet (a stale redelivery) changes nothing.
	if err := f.HandleOrderEvent(ctx, event(orders.EventConfirmed, orderIDs[0], &nb.ID)); err != nil || state(0) != "placed" {
		t.Fatalf("undecided order: %v, receiver %s", err, state(0))
	}
	// Receiver 0: confirmed in full; the event is delivered three times.
	exec(`UPDATE orders SET status = 'confirmed', delivered_amount = amount WHERE id = $1`, orderIDs[0])
	for range 3 {
		if err := f.HandleOrderEvent(ctx, event(orders.EventConfirmed, orderIDs[0], &nb.ID)); err != nil {
			t.Fatal(err)
		}
	}
	// An event of a delivered order's later life, and an order of no batch: nothing.
	exec(`UPDATE orders SET status = 'expired' WHERE id = $1`, orderIDs[0])
	if err := f.HandleOrderEvent(ctx, event(orders.EventExpired, orderIDs[0], nil)); err != nil {
		t.Fatal(err)
	}
	if err := f.HandleOrderEvent(ctx, event(orders.EventFailed, orderstore.NewID(), nil)); err != nil {
		t.Fatal(err)
	}
	if state(0) != "completed" || completed() != 0 {
		t.Fatalf("receiver 0 %s, %d batch.completed", state(0), completed())
	}
	// Receiver 1: a partial delivery with its pro-rata refund.
	exec(`UPDATE orders SET status = 'active', delivered_amount = amount / 4, partial = true, refunded_amount_sun = $2 WHERE id = $1`,
		orderIDs[1], price*3/4)
	if err := f.HandleOrderEvent(ctx, event(orders.EventConfirmed, orderIDs[1], &nb.ID)); err != nil || state(1) != "partial" {
		t.Fatalf("receiver 1: %v %s", err, state(1))
	}
	// Receiver 2: failed and reversed. Its order.failed (no batch_id in the spec's data) is
	// handled by eight concurrent consumers while the sweep runs too.
	exec(`UPDATE orders SET status = 'failed', refunded_amount_sun = charged_amount_sun,
		failure = '{"code": 5002, "slug": "delegation_failed", "message": "the delegation never landed"}' WHERE id = $1`, orderIDs[2])
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(rctx, RunOptions{}) }()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.HandleOrderEvent(ctx, event(orders.EventFailed, orderIDs[2], nil)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // a few sweeps over the finished batch
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if n := completed(); n != 1 {
		t.Fatalf("%d batch.completed events", n)
	}
	b, err := batchstore.Get(ctx, db.Pool, acc, nb.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantCharged := int64(price + price/4)
	if b.Status != batches.Partial || b.Summary != (batches.Summary{Total: 3, Completed: 1, Partial: 1, Failed: 1}) ||
		b.ChargedAmountSun != wantCharged || b.FinishedAt == nil {
		t.Fatalf("batch %+v", b.Record)
	}
	if e := b.Receivers[2].Error; e == nil || e.Code != 5002 || e.Slug != "delegation_failed" {
		t.Fatalf("failed receiver's error %+v", e)
	}
	var raw []byte
	if err := db.Pool.QueryRow(ctx, `SELECT value FROM outbox WHERE topic = 'events.batches.v1' AND key = $1`, nb.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var env events.Envelope
	var d batches.CompletedData
	if json.Unmarshal(raw, &env) != nil || json.Unmarshal(env.Data, &d) != nil {
		t.Fatalf("batch.completed %s", raw)
	}
	want := batches.CompletedData{BatchID: nb.ID, ClientBatchID: "outcomes", Status: batches.Partial, Summary: b.Summary,
		ChargedAmountSun: wantCharged, FinishedAt: *b.FinishedAt}
	if env.Event != batches.EventCompleted || env.AccountID != acc || env.EventVersion != 1 ||
		d.BatchID != want.BatchID || d.ClientBatchID != want.ClientBatchID || d.Status != want.Status || d.Summary != want.Summary ||
		d.ChargedAmountSun != want.ChargedAmountSun || time.Time(d.FinishedAt).UnixMilli() != time.Time(want.FinishedAt).UnixMilli() {
		t.Fatalf("batch.completed %+v %+v, want %+v", env, d, want)
	}
}
