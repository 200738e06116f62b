package orderflow

import (
	"context"
	"testing"
	"time"

	"rental/infra/tron"
	"rental/schemas/orders"
)

// Two processor replicas allocate from the same two small pools at once, with more orders
// than the pools can fill: allocations come in groups (allocate.go) from both replicas and
// per order from their timers. No fill is delegated twice, no pool delegates more than it
// has, every order the pools could not fill fails with 5001 (never a delegation the chain
// refused for lack of stake), and the ledger invariants hold.
func TestTwoReplicasAllocateFromTheSamePoolsWithoutOvercommitting(t *testing.T) {
	const stakeTRX, perOrderTRX, n = 3_000, 100, 80 // room for about 60 orders
	e := newEnv(t, stakeTRX, stakeTRX)
	ctx := context.Background()
	res, err := e.node.GetAccountResource(ctx, e.pools[0].Address())
	if err != nil {
		t.Fatal(err)
	}
	amount, err := tron.EnergyForBalance(perOrderTRX*tron.SunPerTRX, res.TotalEnergyLimit, res.TotalEnergyWeight)
	if err != nil || amount <= 0 {
		t.Fatalf("energy for %d TRX: %d, %v", perOrderTRX, amount, err)
	}
	accs := []string{e.account(10_000), e.account(10_000), e.account(10_000), e.account(10_000)}
	receivers := make([]tron.Address, n)
	for i := range receivers {
		receivers[i] = e.receiver(true)
	}
	if _, err := e.sim.Mine(1); err != nil {
		t.Fatal(err)
	}
	e.startFlow()
	e.startFlow()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.order(accs[i%len(accs)], orderSpec{resource: orders.Energy, amount: amount, tier: "1h", receiver: receivers[i]}).ID
	}

	deadline := time.Now().Add(90 * time.Second)
	for {
		var open int
		if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status NOT IN ('active', 'failed')`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d orders neither active nor failed after 90 s", open)
		}
		time.Sleep(200 * time.Millisecond)
	}

	var active, failed5001, failedOther int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'active'),
			count(*) FILTER (WHERE status = 'failed' AND (failure->>'code')::int = 5001),
			count(*) FILTER (WHERE status = 'failed' AND (failure->>'code')::int <> 5001) FROM orders`).
		Scan(&active, &failed5001, &failedOther); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d orders active, %d failed for want of stock", active, failed5001)
	if failedOther != 0 {
		t.Fatalf("%d orders failed otherwise than 5001: a delegation beyond a pool's stake was refused by the chain", failedOther)
	}
	if active == 0 || failed5001 == 0 {
		t.Fatalf("want both delivered and sold-out orders, got %d and %d", active, failed5001)
	}
	var doubled, refused int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT order_id, fill_seq FROM signed_txs
		WHERE purpose = 'delegate' AND state <> 'dropped' GROUP BY 1, 2 HAVING count(*) > 1) d`).Scan(&doubled); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM order_fills WHERE state = 'failed'`).Scan(&refused); err != nil {
		t.Fatal(err)
	}
	if doubled != 0 || refused != 0 {
		t.Fatalf("%d fills with two live delegations, %d fills refused", doubled, refused)
	}
	for _, p := range e.pools {
		var landed int64
		if err := e.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(balance_sun), 0) FROM order_fills WHERE pool_address = $1 AND state = 'landed'`,
			p.Address().String()).Scan(&landed); err != nil {
			t.Fatal(err)
		}
		if landed > stakeTRX*tron.SunPerTRX {
			t.Fatalf("pool %s delegated %d SUN of a %d TRX stake", p.Address(), landed, stakeTRX)
		}
	}
	for i, id := range ids {
		var want int64
		if err := e.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(balance_sun), 0) FROM order_fills WHERE order_id = $1 AND state = 'landed'`, id).
			Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := e.delegated(receivers[i], orders.Energy); got != want {
			t.Fatalf("order %s: receiver holds %d SUN of delegation, the order's landed fills %d", id, got, want)
		}
	}
	e.invariants()
}
