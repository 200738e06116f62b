package orderstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/schemas/network"
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
	out := PoolsLocked{InFlight: map[string]int64{}}
	addrs, after := make([]string, len(pools)), make([]time.Time, len(pools))
	for i, p := range pools {
		addrs[i], after[i] = p.Address, p.ReadAfter
	}
	b := &pgx.Batch{}
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
	return out, tx.SendBatch(ctx, b).Close()
}
