package orderstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rental/schemas/orders"
)

// Relayed transactions (migration 00045): an order of POST /v1/transactions carries the
// customer's signed call in relayed_transactions, and its customer-visible state in
// orders.transaction. Acceptance writes both with the order (QueueInsertLimited); the
// order processor moves the state (SetRelayState).

// NewRelay is the relayed transaction stored with a new order.
type NewRelay struct {
	TxID           string
	Owner          string
	Signed         json.RawMessage // the transaction as the customer sent it
	Expiration     time.Time
	EnergyRequired int64 // the call's energy at acceptance (the node's estimate)
}

// withRelay is the record of a new order relaying n (waiting for its delegation).
func (r Row) withRelay(n *NewRelay) Row {
	if n != nil {
		r.Transaction = &orders.RelayedTransaction{TxID: n.TxID, Status: orders.TxWaiting}
	}
	return r
}

// queueRelay stores the relayed transaction of the order n in b, after its insert: only if
// the order row was written (the in-flight limit may have declined it).
func queueRelay(b *pgx.Batch, n NewOrder) error {
	obj, err := json.Marshal(orders.RelayedTransaction{TxID: n.Relay.TxID, Status: orders.TxWaiting})
	if err != nil {
		return err
	}
	b.Queue(`WITH o AS (
			UPDATE orders SET transaction = $2 WHERE id = $1 RETURNING id, account_id, created_at
		)
		INSERT INTO relayed_transactions (order_id, account_id, txid, owner, signed, expiration, energy_required, created_at)
		SELECT id, account_id, $3, $4, $5, $6, $7, created_at FROM o`,
		n.ID, obj, n.Relay.TxID, n.Relay.Owner, []byte(n.Relay.Signed), n.Relay.Expiration.UTC(), n.Relay.EnergyRequired)
	return nil
}

// IsRelayTaken reports the error of storing a transaction another order relays already.
func IsRelayTaken(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "relayed_transactions_txid_key"
}

// RelayOf names the order relaying txid and its account; found is false when none does.
func RelayOf(ctx context.Context, q Querier, txid string) (accountID, orderID string, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT account_id, order_id FROM relayed_transactions WHERE txid = $1`, txid).Scan(&accountID, &orderID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	return accountID, orderID, err == nil, err
}

// PendingRelay is a relayed transaction the processor still has work for.
type PendingRelay struct {
	OrderID        string
	TxID           string
	Owner          string
	Signed         json.RawMessage
	Expiration     time.Time
	EnergyRequired int64
	OrderStatus    orders.Status
	State          orders.RelayedTransaction
}

// PendingRelays lists up to n relayed transactions still pending, oldest first.
func PendingRelays(ctx context.Context, q Querier, n int) ([]PendingRelay, error) {
	rows, err := q.Query(ctx, `SELECT r.order_id, r.txid, r.owner, r.signed, r.expiration, r.energy_required, o.status, o.transaction
		FROM relayed_transactions r JOIN orders o ON o.id = r.order_id
		WHERE r.pending ORDER BY r.created_at LIMIT $1`, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingRelay, error) {
		var p PendingRelay
		var status string
		var state []byte
		if err := r.Scan(&p.OrderID, &p.TxID, &p.Owner, &p.Signed, &p.Expiration, &p.EnergyRequired, &status, &state); err != nil {
			return p, err
		}
		p.OrderStatus = orders.Status(status)
		return p, json.Unmarshal(state, &p.State)
	})
}

// SetRelayState records the relayed transaction's new state on its order (a change the
// customer sees: updated_at moves), inside tx after Lock. pending false ends the
// processor's work on it.
func SetRelayState(ctx context.Context, tx pgx.Tx, orderID string, t orders.RelayedTransaction, pending bool, at time.Time) error {
	obj, err := json.Marshal(t)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(`UPDATE orders SET transaction = $2, updated_at = $3 WHERE id = $1`, orderID, obj, at.UTC())
	b.Queue(`UPDATE relayed_transactions SET pending = $2,
			broadcast_at = CASE WHEN $3 THEN coalesce(broadcast_at, $4) ELSE broadcast_at END
		WHERE order_id = $1`, orderID, pending, t.Status == orders.TxBroadcast, at.UTC())
	return tx.SendBatch(ctx, b).Close()
}
