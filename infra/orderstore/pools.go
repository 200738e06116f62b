package orderstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/pg"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// The own stake pools (stake_pools): one row per address, the lock allocation takes so that
// replicas never sell the same stake twice. Their in-flight figures are sums over the fills.

// RegisterPool records an own stake pool of the network, once, with its in-flight bound
// (in_flight_bound_sun, migration 00024) at the exact figure.
func RegisterPool(ctx context.Context, db DB, address string, n network.Network) error {
	_, err := db.Exec(ctx, `INSERT INTO stake_pools (address, network, in_flight_bound_sun)
		VALUES ($1, $2, coalesce((SELECT sum(balance_sun) FROM order_fills
			WHERE pool_address = $1 AND source = 'pool' AND state IN ('reserved', 'broadcast')), 0))
		ON CONFLICT (address) DO NOTHING`,
		address, string(n))
	return err
}

// PoolsLocked is what LockPools read under the pools' locks.
type PoolsLocked struct {
	// Order is the network's pools in address order: the order they are drawn from.
	Order []string
	// InFlight is, by pool address, the staked balance of its fills not yet visible in the
	// chain's figure read at the pool's instant: every fill reserved or broadcast, and every
	// fill that landed after that instant. Unless Exact, the reserved and broadcast part is
	// the pool's bound, which is never less (migration 00024): a figure to allocate against
	// safely, if perhaps short of what the pool could give.
	InFlight map[string]int64
	Exact    bool
}

// PoolFigure is a pool whose delegatable balance the chain reported at ReadAfter (less the
// caller's margin for clocks).
type PoolFigure struct {
	Address   string
	ReadAfter time.Time
}

// LockPools locks every pool row of the network in address order (replicas never
// deadlock) until tx ends, and sums the in-flight fills of the pools read exactly, in one
// round trip. The sum is a statement of its own after the lock: a statement sees what was
// committed when it started, so it must start once the lock is held.
func LockPools(ctx context.Context, tx pgx.Tx, n network.Network, pools []PoolFigure) (PoolsLocked, error) {
	b := &pgx.Batch{}
	out := queueLock(b, n)
	queueExact(b, pools, out)
	return *out, tx.SendBatch(ctx, b).Close()
}

// QueueLockPools queues the lock of LockPools in b, with the in-flight figures from the
// pools' bounds and the fills landed since each pool's instant (a range of an index),
// instead of the sum over every fill in flight; the answer is there once b ran. When the
// bounds leave too little, ExactInFlight sums the fills under the same locks.
func QueueLockPools(b *pgx.Batch, n network.Network, pools []PoolFigure) *PoolsLocked {
	out := queueLock(b, n)
	addrs, after := figureArgs(pools)
	b.Queue(`SELECT p.address, coalesce((SELECT sum(balance_sun) FROM order_fills f WHERE f.pool_address = p.address
				AND f.source = 'pool' AND f.state = 'landed' AND f.updated_at > p.after), 0)
		FROM unnest($1::text[], $2::timestamptz[]) AS p(address, after)`, addrs, after).
		Query(func(rows pgx.Rows) error {
			landed, err := collectSums(rows)
			for a, v := range landed {
				out.InFlight[a] += v
			}
			for a := range out.InFlight {
				if _, read := landed[a]; !read {
					delete(out.InFlight, a) // a pool without a figure is not drawn from
				}
			}
			return err
		})
	return out
}

// ExactInFlight sums the in-flight fills of the pools read (whose locks tx holds) and sets
// their bounds to the exact figure, in one round trip.
func ExactInFlight(ctx context.Context, tx pgx.Tx, pools []PoolFigure) (map[string]int64, error) {
	b := &pgx.Batch{}
	out := &PoolsLocked{InFlight: map[string]int64{}}
	queueExact(b, pools, out)
	return out.InFlight, tx.SendBatch(ctx, b).Close()
}

// queueLock queues the lock of the network's pools, reading their order and bounds.
func queueLock(b *pgx.Batch, n network.Network) *PoolsLocked {
	out := &PoolsLocked{InFlight: map[string]int64{}}
	b.Queue(`SELECT address, in_flight_bound_sun FROM stake_pools WHERE network = $1 ORDER BY address FOR UPDATE`, string(n)).
		Query(func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				var a string
				var bound int64
				if err := rows.Scan(&a, &bound); err != nil {
					return err
				}
				out.Order = append(out.Order, a)
				out.InFlight[a] = bound
			}
			return rows.Err()
		})
	return out
}

// queueExact queues the exact in-flight sums of the pools read into out (replacing what
// is there) and the reset of their bounds to the reserved and broadcast part.
func queueExact(b *pgx.Batch, pools []PoolFigure, out *PoolsLocked) {
	addrs, after := figureArgs(pools)
	b.Queue(`WITH s AS (
			SELECT p.address,
				coalesce((SELECT sum(balance_sun) FROM order_fills f WHERE f.pool_address = p.address
					AND f.source = 'pool' AND f.state IN ('reserved', 'broadcast')), 0) AS flight,
				coalesce((SELECT sum(balance_sun) FROM order_fills f WHERE f.pool_address = p.address
					AND f.source = 'pool' AND f.state = 'landed' AND f.updated_at > p.after), 0) AS landed
			FROM unnest($1::text[], $2::timestamptz[]) AS p(address, after)),
		bound AS (UPDATE stake_pools sp SET in_flight_bound_sun = s.flight FROM s WHERE sp.address = s.address)
		SELECT address, flight + landed FROM s`, addrs, after).
		Query(func(rows pgx.Rows) error {
			sums, err := collectSums(rows)
			out.InFlight, out.Exact = sums, err == nil
			return err
		})
}

func figureArgs(pools []PoolFigure) ([]string, []time.Time) {
	addrs, after := make([]string, len(pools)), make([]time.Time, len(pools))
	for i, p := range pools {
		addrs[i], after[i] = p.Address, p.ReadAfter
	}
	return addrs, after
}

// collectSums reads (address, sum) rows.
func collectSums(rows pgx.Rows) (map[string]int64, error) {
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var a string
		var n int64
		if err := rows.Scan(&a, &n); err != nil {
			return nil, err
		}
		out[a] = n
	}
	return out, rows.Err()
}

// ToAllocate is what QueueLockToAllocate read: the orders it locked.
type ToAllocate struct{ Rows []Row }

// QueueLockToAllocate queues the lock of those of ids that are still waiting for their
// allocation (created or paid), skipping any another transaction holds (a step of that
// order is running; it allocates the order itself). The rows are there once b ran.
func QueueLockToAllocate(b *pgx.Batch, ids []string) *ToAllocate {
	out := &ToAllocate{}
	// By id alone (byIDOnly); a row it locks that no longer waits stays locked until the
	// transaction ends and is left alone.
	b.Queue(`SELECT `+columns+` FROM orders WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED`, ids).
		Query(func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				r, err := scan(rows)
				if err != nil {
					return err
				}
				if r.Status == orders.Created || r.Status == orders.Paid {
					out.Rows = append(out.Rows, r)
				}
			}
			return rows.Err()
		})
	return out
}

// BeginAllocation begins a transaction on conn that locks those of ids still waiting for
// their allocation (QueueLockToAllocate) and then the network's pools with their in-flight
// figures from the bounds (QueueLockPools): BEGIN and all of it in one round trip
// (pg.BeginWith).
func BeginAllocation(ctx context.Context, conn *pgx.Conn, ids []string, n network.Network, pools []PoolFigure) (pgx.Tx, *ToAllocate, *PoolsLocked, error) {
	b := &pgx.Batch{}
	orders := QueueLockToAllocate(b, ids)
	locked := QueueLockPools(b, n, pools)
	tx, err := begin(ctx, conn, b)
	if err != nil {
		return nil, nil, nil, err
	}
	return tx, orders, locked, nil
}

// SendCommit runs the queued statements and COMMIT in one round trip (tx must come from
// BeginAllocation or BeginLocked); w is emptied. On an error the caller rolls tx back.
func (w *Writes) SendCommit(ctx context.Context, tx pgx.Tx) error {
	w.flush()
	outcome := pg.QueueCommit(&w.b, tx)
	err := tx.SendBatch(ctx, &w.b).Close()
	w.b = pgx.Batch{}
	if err != nil {
		return err
	}
	return outcome()
}
