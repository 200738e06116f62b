package orderstore

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/testenv"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// A pool's in-flight bound is never below the exact sum of its fills reserved or broadcast,
// whatever writes them (the triggers of migration 00024); fills leaving that set leave it
// alone, and ExactInFlight sets it to the exact figure under the pools' locks.
func TestPoolInFlightBound(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	const pool, other = "TPoolBoundA", "TPoolBoundB"
	for _, p := range []string{pool, other} {
		if err := RegisterPool(ctx, db.Pool, p, network.Nile); err != nil {
			t.Fatal(err)
		}
	}
	acc := testAccount(t, db.Pool)
	newOrder := func() string {
		t.Helper()
		tier, secs := "1h", int64(3600)
		n := NewOrder{ID: NewID(), AccountID: acc, Network: network.Nile, ClientOrderID: NewID(), Resource: orders.Energy, Amount: 65_000,
			Tier: &tier, DurationSeconds: &secs, Receiver: "TRecv", UnitPriceCenti: 6_050, EnergyAmountSun: 3_932_500, CreatedAt: time.Now()}
		if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { _, _, err := InsertLimited(ctx, tx, n, 1000); return err }); err != nil {
			t.Fatal(err)
		}
		return n.ID
	}
	read := []PoolFigure{{Address: pool, ReadAfter: time.Now().Add(time.Hour)}, {Address: other, ReadAfter: time.Now().Add(time.Hour)}}
	state := func() (bound, exact map[string]int64) {
		t.Helper()
		var locked *PoolsLocked
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			locked = QueueLockPools(b, network.Nile, read)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			var err error
			exact, err = ExactInFlight(ctx, tx, read)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if locked.Exact {
			t.Fatal("QueueLockPools reported exact sums")
		}
		return locked.InFlight, exact
	}
	reserve := func(id string, fills ...NewFill) {
		t.Helper()
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			var w Writes
			for _, fl := range fills {
				w.ReserveFill(id, fl)
			}
			return w.Send(ctx, tx)
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	a, b := newOrder(), newOrder()
	reserve(a, NewFill{Seq: 0, Source: SourcePool, Pool: pool, Amount: 40_000, BalanceSun: 3_000_000_000},
		NewFill{Seq: 1, Source: SourcePool, Pool: other, Amount: 25_000, BalanceSun: 2_000_000_000})
	reserve(b, NewFill{Seq: 0, Source: SourcePool, Pool: pool, Amount: 65_000, BalanceSun: 5_000_000_000},
		NewFill{Seq: 1, Source: "provider_x", Amount: 1_000})
	bound, exact := state()
	if bound[pool] != 8_000_000_000 || bound[other] != 2_000_000_000 || exact[pool] != 8_000_000_000 || exact[other] != 2_000_000_000 {
		t.Fatalf("after reserving: bound %v, exact %v; want 8e9 and 2e9 both", bound, exact)
	}

	// b's fill fails: the exact sum falls, the bound stays until ExactInFlight resets it
	// (state() ran one, so the next state() reads the reset bound).
	if _, err := db.Pool.Exec(ctx, `UPDATE order_fills SET state = 'failed' WHERE order_id = $1 AND seq = 0`, b); err != nil {
		t.Fatal(err)
	}
	bound, exact = state()
	if bound[pool] != 8_000_000_000 || exact[pool] != 3_000_000_000 {
		t.Fatalf("after a fill failed: bound %d, exact %d; want 8e9 (not lowered) and 3e9", bound[pool], exact[pool])
	}
	if bound, _ = state(); bound[pool] != 3_000_000_000 {
		t.Fatalf("bound after ExactInFlight: %d, want 3e9", bound[pool])
	}

	// A fill put back into flight by any statement raises the bound with it.
	if _, err := db.Pool.Exec(ctx, `UPDATE order_fills SET state = 'reserved' WHERE order_id = $1 AND seq = 0`, b); err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := db.Pool.QueryRow(ctx, `SELECT in_flight_bound_sun FROM stake_pools WHERE address = $1`, pool).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got < 8_000_000_000 {
		t.Fatalf("bound %d after a fill came back into flight, below the exact 8e9", got)
	}
	// Moving within the set (reserved -> broadcast) changes nothing.
	if _, err := db.Pool.Exec(ctx, `UPDATE order_fills SET state = 'broadcast' WHERE order_id = $1 AND seq = 0`, a); err != nil {
		t.Fatal(err)
	}
	var again int64
	if err := db.Pool.QueryRow(ctx, `SELECT in_flight_bound_sun FROM stake_pools WHERE address = $1`, pool).Scan(&again); err != nil || again != got {
		t.Fatalf("bound %d after reserved -> broadcast, want %d unchanged (%v)", again, got, err)
	}

	// Landed since the pool's figure was read counts in both.
	if _, err := db.Pool.Exec(ctx, `UPDATE order_fills SET state = 'landed', updated_at = now() WHERE order_id = $1 AND seq = 0`, a); err != nil {
		t.Fatal(err)
	}
	read[0].ReadAfter = time.Now().Add(-time.Minute)
	bound, exact = state()
	if exact[pool] != 8_000_000_000 || bound[pool] < exact[pool] {
		t.Fatalf("with a fill landed since the figure: bound %d, exact %d; want exact 8e9 and bound at least that", bound[pool], exact[pool])
	}
}

// A fill carries its order's network, resource and tier, whatever inserts it (the trigger
// of migration 00025): the pricer sums the fills in flight by them without reading orders.
func TestFillCarriesItsOrdersColumns(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	acc := testAccount(t, db.Pool)
	tier, secs := "5m", int64(300)
	n := NewOrder{ID: NewID(), AccountID: acc, Network: network.Nile, ClientOrderID: "c", Resource: orders.Bandwidth, Amount: 1_000,
		Tier: &tier, DurationSeconds: &secs, Receiver: "TRecv", UnitPriceCenti: 6_050, EnergyAmountSun: 60_500, CreatedAt: time.Now()}
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, _, err := InsertLimited(ctx, tx, n, 10); err != nil {
			return err
		}
		var w Writes
		w.ReserveFill(n.ID, NewFill{Seq: 0, Source: SourcePool, Pool: "TPool", Amount: 500, BalanceSun: 1_000_000})
		if err := w.Send(ctx, tx); err != nil {
			return err
		}
		return AppendProviderFill(ctx, tx, n.ID, "provider_x", 500)
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT network, resource, tier FROM order_fills WHERE order_id = $1 ORDER BY seq`, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got [][3]*string
	for rows.Next() {
		var g [3]*string
		if err := rows.Scan(&g[0], &g[1], &g[2]); err != nil {
			t.Fatal(err)
		}
		got = append(got, g)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d fills, want 2", len(got))
	}
	for i, g := range got {
		if g[0] == nil || *g[0] != "nile" || g[1] == nil || *g[1] != "bandwidth" || g[2] == nil || *g[2] != "5m" {
			t.Fatalf("fill %d: network, resource, tier = %v %v %v", i, g[0], g[1], g[2])
		}
	}
}
