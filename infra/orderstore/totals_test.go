package orderstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/pg"
	"rental/infra/testenv"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// The running totals (migration 00027) answer what summing the orders answers, whatever
// path wrote the orders: group and single inserts, every kind of end, a delete, a lapsed
// rental not ended yet, a repeated confirmation.
func TestRunningTotalsAnswerWhatTheOrdersSum(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	acc := testAccount(t, db.Pool)
	t0 := time.Date(2026, 3, 4, 22, 0, 0, 0, time.UTC)
	tier, secs := "1h", int64(3600)
	order := func(i int, recv string, res orders.Resource) NewOrder {
		return NewOrder{ID: NewID(), AccountID: acc, Network: network.Nile, ClientOrderID: fmt.Sprintf("t-%d", i),
			Resource: res, Amount: int64(10_000 * (i + 1)), Tier: &tier, DurationSeconds: &secs, Receiver: recv,
			UnitPriceCenti: 6000, EnergyAmountSun: 1_000_000, CreatedAt: t0}
	}
	recvs := []string{"TRa", "TRb", "TRc"}
	// One group insert over three receivers, bandwidth among them, then single inserts.
	var ns []NewOrder
	for i := range 9 {
		res := orders.Energy
		if i%4 == 3 {
			res = orders.Bandwidth
		}
		ns = append(ns, order(i, recvs[i%3], res))
	}
	b := &pgx.Batch{}
	if _, err := QueueInsertMany(b, ns); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	for i := 9; i < 12; i++ {
		n := order(i, recvs[i%3], orders.Energy)
		if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { _, err := Insert(ctx, tx, n); return err }); err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}

	day1, day2 := t0.Add(30*time.Minute), t0.Add(150*time.Minute) // 22:30 and 00:30 the next day
	exp := func(at time.Time) *time.Time { e := at.Add(time.Hour); return &e }
	inTx := func(f func(tx pgx.Tx) error) {
		t.Helper()
		if err := pgx.BeginFunc(ctx, db.Pool, f); err != nil {
			t.Fatal(err)
		}
	}
	// Confirmations on two days, one of them partial; the first one twice.
	inTx(func(tx pgx.Tx) error {
		var w Writes
		w.ConfirmMany([]string{ns[0].ID, ns[1].ID, ns[3].ID}, []Delivery{
			{Delivered: ns[0].Amount, DelegatedAt: day1, ExpiresAt: exp(day1)},
			{Delivered: ns[1].Amount / 2, Partial: true, DelegatedAt: day1, ExpiresAt: exp(day1)},
			{Delivered: ns[3].Amount, DelegatedAt: day1, ExpiresAt: exp(day1)}, // bandwidth: not energy delivered
		})
		return w.Send(ctx, tx)
	})
	inTx(func(tx pgx.Tx) error {
		_, err := Confirm(ctx, tx, ns[2].ID, Delivery{Delivered: ns[2].Amount, DelegatedAt: day2, ExpiresAt: exp(day2)})
		return err
	})
	inTx(func(tx pgx.Tx) error {
		_, err := Confirm(ctx, tx, ns[0].ID, Delivery{Delivered: ns[0].Amount, DelegatedAt: day1, ExpiresAt: exp(day1)})
		return err
	})
	// Ends of every kind, and a delete of an order still live.
	inTx(func(tx pgx.Tx) error {
		if err := End(ctx, tx, ns[0].ID, orders.Expired, nil, day1); err != nil {
			return err
		}
		if err := Fail(ctx, tx, ns[4].ID, orders.Failure{Code: 5001, Slug: "x", Message: "x"}, t0); err != nil {
			return err
		}
		if err := MarkRefunded(ctx, tx, ns[5].ID, "test", t0); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM orders WHERE id = $1`, ns[6].ID)
		return err
	})

	// What the running totals replace: sums over the orders.
	summedLive := func(recv string, now time.Time) int64 {
		var n int64
		if err := db.Pool.QueryRow(ctx, `SELECT coalesce(sum(amount), 0)::bigint FROM orders
			WHERE receiver = $1 AND resource = 'energy'
			  AND status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active')
			  AND (expires_at IS NULL OR expires_at > $2)`, recv, now).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	summedDelivered := func(since time.Time) int64 {
		var n int64
		if err := db.Pool.QueryRow(ctx, `SELECT coalesce(sum(delivered_amount), 0)::bigint FROM orders
			WHERE network = 'nile' AND resource = 'energy' AND delegated_at >= $1`, since).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Before day1's rentals lapse, after them (ns[1] still active past its expiry), and
	// after every one.
	for _, now := range []time.Time{t0, day1.Add(90 * time.Minute), day2.Add(2 * time.Hour)} {
		var total int64
		for _, r := range recvs {
			got, err := ReceiverLiveEnergy(ctx, db.Pool, r, now)
			if err != nil {
				t.Fatal(err)
			}
			if want := summedLive(r, now); got != want {
				t.Fatalf("%s at %s: live energy %d, the orders sum %d", r, now, got, want)
			}
			total += got
		}
		if total == 0 {
			t.Fatalf("no live energy at %s: nothing compared", now)
		}
	}
	b = &pgx.Batch{}
	live := QueueReceiversLiveEnergy(b, append(recvs, "TRnone"), t0)
	if err := db.Pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recvs {
		if live.Of(r) != summedLive(r, t0) {
			t.Fatalf("%s in a group: %d, the orders sum %d", r, live.Of(r), summedLive(r, t0))
		}
	}
	if live.Of("TRnone") != 0 {
		t.Fatalf("a receiver without orders holds %d", live.Of("TRnone"))
	}
	// The orders past their expiry are found by receiver and expiry, as acceptance plans
	// its group (pg.IndexPlans), not by reading every live order of the receiver.
	inTx(func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, pg.IndexPlans); err != nil {
			return err
		}
		plan, err := pg.Plan(ctx, tx, receiversLiveEnergySQL, recvs, t0)
		if err != nil {
			return err
		}
		if !strings.Contains(plan, `"Index Name": "orders_receiver_expiry"`) || !strings.Contains(plan, "(expires_at <= ") {
			t.Fatalf("the lapsed orders are not found through orders_receiver_expiry by expiry: %s", plan)
		}
		return nil
	})

	midnight1 := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	for _, since := range []time.Time{midnight1, midnight1.Add(24 * time.Hour), midnight1.Add(48 * time.Hour)} {
		got, err := DeliveredSince(ctx, db.Pool, network.Nile, since)
		if err != nil {
			t.Fatal(err)
		}
		if want := summedDelivered(since); got != want {
			t.Fatalf("delivered since %s: %d, the orders sum %d", since, got, want)
		}
	}
	if got, _ := DeliveredSince(ctx, db.Pool, network.Nile, midnight1); got != ns[0].Amount+ns[1].Amount/2+ns[2].Amount {
		t.Fatalf("delivered %d: a repeated confirmation or the bandwidth order counted", got)
	}
	if got, _ := DeliveredSince(ctx, db.Pool, network.Mainnet, midnight1); got != 0 {
		t.Fatalf("mainnet delivered %d from nile's orders", got)
	}
}
