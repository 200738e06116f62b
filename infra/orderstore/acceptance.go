package orderstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reads and locks order acceptance (infra/acceptance) runs before it writes an order: the
// own-address check of receivers, the per-receiver lock of the energy ceiling, and whether
// a placement's order exists already.

// OwnAddresses is QueueOwnAddresses' answer once its batch ran.
type OwnAddresses struct {
	found map[string]bool
}

// Has reports whether addr is a deposit address (retired ones included) or a stake pool
// known to the database.
func (o *OwnAddresses) Has(addr string) bool { return o.found[addr] }

// QueueOwnAddresses queues, in one statement, which of addrs are the service's own in the
// database: deposit addresses (every one ever issued) and stake pools. The same statement
// sets the transaction's lock_timeout to lockWait (set_config with is_local, as SET LOCAL,
// in the same round trip); nil leaves the transaction's lock_timeout as it is.
func QueueOwnAddresses(b *pgx.Batch, addrs []string, lockWait *time.Duration) *OwnAddresses {
	o := &OwnAddresses{found: map[string]bool{}}
	var wait *string
	if lockWait != nil {
		w := strconv.FormatInt(lockWait.Milliseconds(), 10)
		wait = &w
	}
	b.Queue(`SELECT set_config('lock_timeout', coalesce($2::text, current_setting('lock_timeout')), true),
			array(SELECT r FROM unnest($1::text[]) AS r
			WHERE EXISTS (SELECT 1 FROM deposit_addresses WHERE address = r) OR EXISTS (SELECT 1 FROM stake_pools WHERE address = r))`,
		addrs, wait).QueryRow(func(r pgx.Row) error {
		var lockTimeout string
		var ours []string
		if err := r.Scan(&lockTimeout, &ours); err != nil {
			return err
		}
		for _, a := range ours {
			o.found[a] = true
		}
		return nil
	})
	return o
}

// receiverLock is the transaction-scoped advisory lock that serialises the energy ceiling
// check (RECEIVER_MAX_ENERGY) of one receiver ($1) across creations, one by one and in
// groups.
const receiverLock = `hashtextextended('orders.receiver:' || $1, 0)`

// LockReceiver takes the receiver's ceiling lock until tx ends.
func LockReceiver(ctx context.Context, tx pgx.Tx, receiver string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+receiverLock+`)`, receiver)
	return err
}

// QueueLockReceivers queues LockReceiver for several receivers in one statement; the
// caller sorts them, so that concurrent transactions queue instead of deadlocking.
func QueueLockReceivers(b *pgx.Batch, receivers []string) {
	b.Queue(`SELECT count(pg_advisory_xact_lock(`+strings.Replace(receiverLock, "$1", "r", 1)+`)) FROM unnest($1::text[]) AS r`, receivers)
}

// PlacedBefore reports whether the account has an order with clientOrderID in the same
// batch and subscription (nil: none) already.
func PlacedBefore(ctx context.Context, q Querier, accountID, clientOrderID string, batchID, subscriptionID *string) (bool, error) {
	var exists bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM orders WHERE account_id = $1 AND client_order_id = $2
		AND batch_id IS NOT DISTINCT FROM $3 AND subscription_id IS NOT DISTINCT FROM $4)`,
		accountID, clientOrderID, batchID, subscriptionID).Scan(&exists)
	return exists, err
}
