package orderstore

import (
	"context"

	"rental/schemas/network"
)

// SetPoolCustody records why no signer may use the pool now ("" when one may), registering
// the pool first if needed (migration 00060).
func SetPoolCustody(ctx context.Context, db DB, address string, n network.Network, problem string) error {
	if err := RegisterPool(ctx, db, address, n); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `UPDATE stake_pools SET custody_problem = NULLIF($2, '') WHERE address = $1`, address, problem)
	return err
}

// PoolCustodyProblems returns the pools of every network that no signer may use now, with
// why (health: delivery degraded while any).
func (d DeliveryStats) PoolCustodyProblems(ctx context.Context) (map[string]string, error) {
	rows, err := d.Pool.Query(ctx, `SELECT address, custody_problem FROM stake_pools WHERE custody_problem IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var a, why string
		if err := rows.Scan(&a, &why); err != nil {
			return nil, err
		}
		out[a] = why
	}
	return out, rows.Err()
}
