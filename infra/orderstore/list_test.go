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

func insertOrders(t *testing.T, db *testenv.DB, account string, n int, at func(i int) time.Time) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range n {
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			tier, secs := "1h", int64(3600)
			r, err := Insert(ctx, tx, NewOrder{ID: NewID(), AccountID: account, Network: network.Nile,
				ClientOrderID: fmt.Sprintf("c-%d", i), Resource: orders.Energy, Amount: 100_000, Tier: &tier,
				DurationSeconds: &secs, Receiver: "TRecv", UnitPriceCenti: 6000, EnergyAmountSun: 6_000_000, CreatedAt: at(i)})
			ids = append(ids, r.ID)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func TestListKeysetAndReceiverEnergy(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	acc := testAccount(t, db.Pool)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Five orders in one millisecond and five a millisecond later: ties go by id.
	ids := insertOrders(t, db, acc, 10, func(i int) time.Time { return t0.Add(time.Duration(i/5) * time.Millisecond) })
	seen := map[string]bool{}
	var after *Position
	var last Row
	for pages := 0; ; pages++ {
		rows, next, err := List(ctx, db.Pool, acc, Filter{After: after}, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if seen[r.ID] {
				t.Fatalf("%s twice", r.ID)
			}
			seen[r.ID] = true
			if last.ID != "" && (time.Time(r.CreatedAt).After(time.Time(last.CreatedAt)) ||
				(time.Time(r.CreatedAt).Equal(time.Time(last.CreatedAt)) && r.ID > last.ID)) {
				t.Fatalf("order: %s after %s", r.ID, last.ID)
			}
			last = r
		}
		if next == nil {
			if pages != 3 || len(rows) != 1 {
				t.Fatalf("last page %d with %d rows", pages, len(rows))
			}
			break
		}
		after = next
	}
	if len(seen) != 10 {
		t.Fatalf("%d of 10 listed", len(seen))
	}
	if _, _, err := List(ctx, db.Pool, acc, Filter{}, MaxListLimit+1); err == nil {
		t.Fatal("limit above the maximum accepted")
	}

	// Live energy of the receiver: terminal orders and lapsed rentals do not count.
	live := func() int64 {
		n, err := ReceiverLiveEnergy(ctx, db.Pool, "TRecv", t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := live(); n != 1_000_000 {
		t.Fatalf("live %d", n)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE orders SET status = 'expired' WHERE id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE orders SET status = 'active', expires_at = $2 WHERE id = $1`, ids[1], t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE orders SET status = 'active', expires_at = $2 WHERE id = $1`, ids[2], t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := live(); n != 800_000 {
		t.Fatalf("live after ends %d", n)
	}

	// RequestReclaim marks once.
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		r, fresh, err := RequestReclaim(ctx, tx, ids[2], t0)
		if err != nil || !fresh || r.ReclaimRequestedAt == nil || !r.ReclaimRequestedAt.Equal(t0) {
			t.Fatalf("first: %+v %v %v", r.ReclaimRequestedAt, fresh, err)
		}
		r, fresh, err = RequestReclaim(ctx, tx, ids[2], t0.Add(time.Second))
		if err != nil || fresh || !r.ReclaimRequestedAt.Equal(t0) {
			t.Fatalf("second: %+v %v %v", r.ReclaimRequestedAt, fresh, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// GET /v1/status's delivery figures: the hour's orders, its failures, and the median time
// to delegation of the delivered ones; older orders do not count.
func TestDeliveryStatsOfTheLastHour(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	acc := testAccount(t, db.Pool)
	now := time.Now()
	ids := insertOrders(t, db, acc, 5, func(i int) time.Time {
		if i == 4 {
			return now.Add(-2 * time.Hour) // outside the hour
		}
		return now.Add(-time.Duration(10*(i+1)) * time.Minute)
	})
	// Delivered in 4 s, 10 s and 60 s; one failed.
	for i, secs := range []int{4, 10, 60} {
		if _, err := db.Pool.Exec(ctx, `UPDATE orders SET status = 'active', delegated_at = created_at + make_interval(secs => $2) WHERE id = $1`,
			ids[i], secs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE orders SET status = 'failed' WHERE id = $1`, ids[3]); err != nil {
		t.Fatal(err)
	}
	// A batch receiver refused at placement is a failed order that was never a delivery
	// attempt: it does not count.
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		tier, secs := "1h", int64(3600)
		_, err := InsertRefused(ctx, tx, NewOrder{ID: NewID(), AccountID: acc, Network: network.Nile, ClientOrderID: "bat_x:0",
			Resource: orders.Energy, Amount: 65_000, Tier: &tier, DurationSeconds: &secs, Receiver: "TRecv", CreatedAt: now},
			orders.Failure{Code: 4001, Slug: "insufficient_funds", Message: "no money"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := DeliveryStats{Pool: db.Pool}.DeliveryLastHour(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w.Orders != 4 || w.Failed != 1 || w.MedianDeliverySeconds == nil || *w.MedianDeliverySeconds != 10 {
		t.Fatalf("window %+v (median %v), want 4 orders, 1 failed, median 10 s", w, w.MedianDeliverySeconds)
	}
}

// The backlog is read every second on every replica: it counts only the orders not
// delivered yet, and reads them through orders_undelivered, not by scanning every order
// ever taken.
func TestBacklogReadsOnlyUndeliveredOrders(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	acc := testAccount(t, db.Pool)
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	ids := insertOrders(t, db, acc, 3, func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) })
	// 5,000 delivered orders, copies of the first with their own ids: half of them active,
	// half delegated and waiting for their confirmations (still in flight for the account's
	// concurrency limit, but not in the backlog).
	if _, err := db.Pool.Exec(ctx, `INSERT INTO orders SELECT (jsonb_populate_record(o,
			jsonb_build_object('id', o.id || '-' || g, 'client_order_id', 'done-' || g,
				'status', CASE WHEN g % 2 = 0 THEN 'active' ELSE 'delegated' END))).*
		FROM orders o, generate_series(1, 5000) g WHERE o.id = $1`, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE orders SET status = 'allocating' WHERE id = $1`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `ANALYZE orders`); err != nil {
		t.Fatal(err)
	}
	b := NewBacklog(db.Pool, BacklogOptions{Network: network.Nile})
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	r := b.Reading()
	if r.Orders != 3 || !r.Oldest.Equal(t0) {
		t.Fatalf("backlog %d orders, oldest %v; want 3, oldest %v", r.Orders, r.Oldest, t0)
	}
	plan, err := pg.Plan(ctx, db.Pool, backlogQuery, "nile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, `"Index Name": "orders_undelivered"`) || strings.Contains(plan, `"Seq Scan"`) {
		t.Fatalf("the backlog read does not go through orders_undelivered: %s", plan)
	}
}
