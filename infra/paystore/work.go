package paystore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/pg"
	"rental/schemas/network"
	"rental/schemas/payments"
)

// Seen lists up to limit payments not decided yet, oldest first.
func (s *Store) Seen(ctx context.Context, limit int) ([]Payment, error) {
	return s.list(ctx, `SELECT `+cols+` FROM payments WHERE status = 'seen' AND network = $1 ORDER BY seen_at LIMIT $2`, limit)
}

func (s *Store) list(ctx context.Context, sql string, limit int) ([]Payment, error) {
	rows, err := s.pool.Query(ctx, sql, string(s.net), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Payment, error) { return scan(r) })
}

// Act runs fn in a transaction holding the payment's row when it is in status want; a
// payment another worker holds, or no longer in want, is skipped (ok false, fn not run).
func (s *Store) Act(ctx context.Context, txid, want string, fn func(tx pgx.Tx, p Payment) error) (ok bool, err error) {
	err = pg.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		p, err := scan(tx.QueryRow(ctx, `SELECT `+cols+` FROM payments WHERE txid = $1 AND status = $2 FOR UPDATE SKIP LOCKED`, txid, want))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		return fn(tx, p)
	})
	return ok, err
}

// SetDelivering records the order placed for a payment.
func SetDelivering(ctx context.Context, tx pgx.Tx, txid, orderID string, amount, priceSun, keptSun int64) error {
	return one(tx.Exec(ctx, `UPDATE payments SET status = 'delivering', order_id = $2, order_amount = $3, price_sun = $4,
		kept_sun = $5, delivering_at = now(), updated_at = now() WHERE txid = $1`, txid, orderID, amount, priceSun, keptSun))
}

// Refund is a signed refund transaction to store with its payment.
type Refund struct {
	AmountSun int64
	KeptSun   int64
	Reason    string
	TxID      string
	Signed    []byte // the signed transaction as the node's JSON
	Expires   time.Time
}

// SetRefunding stores a signed refund; the processor broadcasts it after the commit and
// again until it lands.
func SetRefunding(ctx context.Context, tx pgx.Tx, txid string, r Refund) error {
	return one(tx.Exec(ctx, `UPDATE payments SET status = 'refunding', refund_sun = refund_sun + $2, kept_sun = $3, reason = $4,
		refund_txid = $5, refund_tx = $6, refund_expires = $7, updated_at = now() WHERE txid = $1`,
		txid, r.AmountSun, r.KeptSun, r.Reason, r.TxID, r.Signed, r.Expires))
}

// ReplaceRefund replaces a refund that expired without landing by a fresh one of the same
// amount (the old one can no longer land: its expiration is past).
func ReplaceRefund(ctx context.Context, tx pgx.Tx, txid, oldTxID, newTxID string, signed []byte, expires time.Time) error {
	return one(tx.Exec(ctx, `UPDATE payments SET refund_txid = $3, refund_tx = $4, refund_expires = $5, updated_at = now()
		WHERE txid = $1 AND refund_txid = $2 AND status = 'refunding'`, txid, oldTxID, newTxID, signed, expires))
}

// SetKept closes a payment nothing is given back for (dust, a token held for support).
func SetKept(ctx context.Context, tx pgx.Tx, txid, status string, keptSun int64, reason string) error {
	if status != payments.StoredKept && status != payments.StoredHeld {
		return errors.New("paystore: SetKept takes kept or held")
	}
	return one(tx.Exec(ctx, `UPDATE payments SET status = $2, kept_sun = $3, reason = $4, updated_at = now() WHERE txid = $1`,
		txid, status, keptSun, reason))
}

// MarkDelivered records that the payment's delegation is broadcast.
func MarkDelivered(ctx context.Context, tx pgx.Tx, txid string) error {
	return one(tx.Exec(ctx, `UPDATE payments SET status = 'delivered', delivered_at = coalesce(delivered_at, now()), updated_at = now()
		WHERE txid = $1`, txid))
}

// Settle records that the payment's order needs nothing more from pay by transfer.
func Settle(ctx context.Context, tx pgx.Tx, txid string) error {
	return one(tx.Exec(ctx, `UPDATE payments SET settled = true, updated_at = now() WHERE txid = $1`, txid))
}

// RefundLanded closes a refund whose transaction is in a block.
func (s *Store) RefundLanded(ctx context.Context, txid, refundTxID string) error {
	_, err := s.pool.Exec(ctx, `UPDATE payments SET status = 'refunded', updated_at = now()
		WHERE txid = $1 AND refund_txid = $2 AND status = 'refunding'`, txid, refundTxID)
	return err
}

func one(_ any, err error) error { return err }

// Open is a payment whose order is in flight, with the order's state and money.
type Open struct {
	Payment
	OrderStatus string
	ChargedSun  int64 // the order's charge held at creation
	RefundedSun int64 // what the order gave back since
}

// OpenOrders lists up to limit payments in delivering or delivered whose order is not
// settled yet.
func (s *Store) OpenOrders(ctx context.Context, limit int) ([]Open, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+prefixed("p.")+`, o.status, o.charged_amount_sun, o.refunded_amount_sun
		FROM payments p JOIN orders o ON o.id = p.order_id
		WHERE p.status IN ('delivering', 'delivered') AND NOT p.settled AND p.network = $1 ORDER BY p.updated_at LIMIT $2`,
		string(s.net), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Open, error) {
		var o Open
		p := &o.Payment
		var nw string
		err := r.Scan(&p.TxID, &nw, &p.Address, &p.RowKey, &p.Sender, &p.Receiver, &p.Memo, &p.Asset, &p.AmountSun, &p.BlockNum,
			&p.BlockID, &p.BlockTime, &p.TxExpires, &p.Status, &p.OrderID, &p.OrderAmount, &p.PriceSun, &p.KeptSun, &p.RefundSun,
			&p.Reason, &p.RefundTxID, &p.Settled, &p.OrphanedAt, &p.SeenAt, &p.DeliveredAt, &p.UpdatedAt,
			&o.OrderStatus, &o.ChargedSun, &o.RefundedSun)
		p.Network = network.Network(nw)
		return o, err
	})
}

// Pending is a stored refund still to land.
type Pending struct {
	TxID       string // the payment's
	Address    string // the payment address that signs
	RowKey     string
	Sender     string
	RefundSun  int64
	RefundTxID string
	Signed     []byte
	Expires    time.Time
}

// Refunding lists up to limit payments whose refund has not landed yet.
func (s *Store) Refunding(ctx context.Context, limit int) ([]Pending, error) {
	rows, err := s.pool.Query(ctx, `SELECT txid, address, row_key, sender, refund_sun, refund_txid, refund_tx, refund_expires
		FROM payments WHERE status = 'refunding' AND network = $1 ORDER BY updated_at LIMIT $2`, string(s.net), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Pending, error) {
		var p Pending
		err := r.Scan(&p.TxID, &p.Address, &p.RowKey, &p.Sender, &p.RefundSun, &p.RefundTxID, &p.Signed, &p.Expires)
		return p, err
	})
}

// Orphaned lists payments acted on whose block a fork removed and that no block holds
// again yet.
func (s *Store) Orphaned(ctx context.Context, limit int) ([]Payment, error) {
	return s.list(ctx, `SELECT `+cols+` FROM payments WHERE orphaned_at IS NOT NULL AND network = $1 ORDER BY orphaned_at LIMIT $2`, limit)
}

// Reverted closes a payment whose transfer a fork removed for good.
func Reverted(ctx context.Context, tx pgx.Tx, txid, reason string) error {
	return one(tx.Exec(ctx, `UPDATE payments SET status = 'reverted', reason = $2, orphaned_at = NULL, settled = true, updated_at = now()
		WHERE txid = $1`, txid, reason))
}
