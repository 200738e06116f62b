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

// RegisterPool records an own stake pool of the network, once.
func RegisterPool(ctx context.Context, db DB, address string, n network.Network) error {
	_, err := db.Exec(ctx, `INSERT INTO stake_pools (address, network) VALUES ($1, $2) ON CONFLICT (address) DO NOTHING`,
		address, string(n))
	return err
}

// PoolsLocked is what LockPools read under the pools' locks.
type PoolsLocked struct {
	// Order is the network's pools in address order: the order they are drawn from.
	Order []string
	// InFlight is, by pool address, the staked balance of its fills not yet visible in the
	// chain's figure read at the pool's instant: every fill reserved or broadcast, and every
	// fill that landed after that instant.
	InFlight map[string]int64
}

// PoolFigure is a pool whose delegatable balance the chain reported at ReadAfter (less the
// caller's margin for clocks).
type PoolFigure struct {
	Address   string
	ReadAfter time.Time
}

// LockPools locks every pool row of the network in address order (replicas never
// deadlock) until tx ends, and sums the in-flight fills of the pools read, in one round
// trip. The sum is a statement of its own after the lock: a statement sees what was
// committed when it started, so it must start once the lock is held.
func LockPools(ctx context.Context, tx pgx.Tx, n network.Network, pools []PoolFigure) (PoolsLocked, error) {
	b := &pgx.Batch{}
	out := QueueLockPools(b, n, pools)
	return *out, tx.SendBatch(ctx, b).Close()
}

// QueueLockPools queues LockPools in b; the answer is there once b ran.
func QueueLockPools(b *pgx.Batch, n network.Network, pools []PoolFigure) *PoolsLocked {
	out := &PoolsLocked{InFlight: map[string]int64{}}
	addrs, after := make([]string, len(pools)), make([]time.Time, len(pools))
	for i, p := range pools {
		addrs[i], after[i] = p.Address, p.ReadAfter
	}
	b.Queue(`SELECT address FROM stake_pools WHERE network = $1 ORDER BY address FOR UPDATE`, string(n)).
		Query(func(rows pgx.Rows) error {
			var err error
			out.Order, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
	b.Queue(`SELECT p.address, coalesce((SELECT sum(balance_sun) FROM order_fills f WHERE f.pool_address = p.address
				AND f.source = 'pool' AND f.state IN ('reserved', 'broadcast')), 0)
			+ coalesce((SELECT sum(balance_sun) FROM order_fills f WHERE f.pool_address = p.address
				AND f.source = 'pool' AND f.state = 'landed' AND f.updated_at > p.after), 0)
		FROM unnest($1::text[], $2::timestamptz[]) AS p(address, after)`, addrs, after).
		Query(func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				var a string
				var n int64
				if err := rows.Scan(&a, &n); err != nil {
					return err
				}
				out.InFlight[a] = n
			}
			return rows.Err()
		})
	return out
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
// sums (QueueLockPools): BEGIN and all of it in one round trip (pg.BeginWith).
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
