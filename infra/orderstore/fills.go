package orderstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"rental/infra/tron"
)

// Fill sources besides the providers' slugs.
const (
	SourcePool = "pool" // one of our stake pools delegates
	SourceDeep = "deep" // rented from the deep reserve contract (Pool is the contract)
)

// Fill states. reserved: allocated, not yet on its way; broadcast: its delegation was sent
// (or a provider delegated); landed / failed: its delegation's block result; returned: the
// stake came back.
const (
	FillReserved  = "reserved"
	FillBroadcast = "broadcast"
	FillLanded    = "landed"
	FillFailed    = "failed"
	FillReturned  = "returned"
)

// Fill is one part of an order (order_fills): who delivers how much.
type Fill struct {
	Seq        int
	Source     string       // SourcePool, SourceDeep or a provider's slug
	Pool       tron.Address // the address delegating: our pool or the provider's
	Amount     int64        // resource units
	BalanceSun int64        // staked TRX delegated for them
	State      string
}

const fillsSQL = `SELECT seq, source, pool_address, amount, balance_sun, state FROM order_fills WHERE order_id = $1 ORDER BY seq`

// Fills reads the order's fills in sequence order.
func Fills(ctx context.Context, q Querier, orderID string) ([]Fill, error) {
	rows, err := q.Query(ctx, fillsSQL, orderID)
	if err != nil {
		return nil, err
	}
	return scanFills(rows)
}

func scanFills(rows pgx.Rows) ([]Fill, error) {
	defer rows.Close()
	var out []Fill
	for rows.Next() {
		fl, err := scanFill(rows, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, fl)
	}
	return out, rows.Err()
}

// scanFill reads one fill row: order_id first when id is not nil, then seq, source,
// pool_address, amount, balance_sun, state.
func scanFill(rows pgx.Rows, id *string) (Fill, error) {
	var fl Fill
	var pool *string // null for a provider fill not bought yet
	dest := []any{&fl.Seq, &fl.Source, &pool, &fl.Amount, &fl.BalanceSun, &fl.State}
	if id != nil {
		dest = append([]any{id}, dest...)
	}
	if err := rows.Scan(dest...); err != nil {
		return fl, err
	}
	if pool != nil {
		a, err := tron.ParseAddress(*pool)
		if err != nil {
			return fl, err
		}
		fl.Pool = a
	}
	return fl, nil
}

// eachOrderFill is a batch query's callback over rows of order_id and a fill's columns
// (scanFill): add receives each fill with its order.
func eachOrderFill(add func(orderID string, fl Fill)) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id string
			fl, err := scanFill(rows, &id)
			if err != nil {
				return err
			}
			add(id, fl)
		}
		return rows.Err()
	}
}

// NewFill is a fill as allocation reserves it. Pool is empty for a provider's fill, whose
// delegating address is known only once it is bought.
type NewFill struct {
	Seq        int
	Source     string
	Pool       string
	Amount     int64
	BalanceSun int64
}

// ReserveFill queues a new fill of the order, reserved.
func (w *Writes) ReserveFill(orderID string, n NewFill) {
	w.fills = append(w.fills, fillRow{orderID, n})
}

// SourceInFlight is the amount of the source's fills reserved or broadcast, of every order.
func SourceInFlight(ctx context.Context, q Querier, source string) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT coalesce(sum(amount), 0) FROM order_fills WHERE source = $1 AND state IN ('reserved', 'broadcast')`,
		source).Scan(&n)
	return n, err
}

// NextFillSeq is the sequence number the order's next fill takes.
func NextFillSeq(ctx context.Context, q Querier, orderID string) (int, error) {
	var seq int
	err := q.QueryRow(ctx, `SELECT max(seq) + 1 FROM order_fills WHERE order_id = $1`, orderID).Scan(&seq)
	return seq, err
}

// AppendProviderFill adds a reserved fill of amount from the provider source as the order's
// last fill (a sold-out provider hands its part to the next one).
func AppendProviderFill(ctx context.Context, tx pgx.Tx, orderID, source string, amount int64) error {
	_, err := tx.Exec(ctx, `INSERT INTO order_fills (order_id, seq, source, amount, balance_sun, state)
		SELECT $1, max(seq) + 1, $2, $3, 0, 'reserved' FROM order_fills WHERE order_id = $1`, orderID, source, amount)
	return err
}

// SetFillState sets one fill's state (FillFailed, FillLanded, ...).
func SetFillState(ctx context.Context, tx pgx.Tx, orderID string, seq int, state string) error {
	_, err := tx.Exec(ctx, `UPDATE order_fills SET state = $3, updated_at = now() WHERE order_id = $1 AND seq = $2`, orderID, seq, state)
	return err
}

// Bought is a provider's answer for a fill: the delegation it made.
type Bought struct {
	From       string // the provider's delegating address
	Amount     int64
	BalanceSun int64
	TxID       string
}

// FillBought records a provider's delegation as the fill, broadcast.
func FillBought(ctx context.Context, tx pgx.Tx, orderID string, seq int, b Bought) error {
	_, err := tx.Exec(ctx, `UPDATE order_fills SET pool_address = $3, amount = $4, balance_sun = $5, delegate_txid = $6, state = 'broadcast',
			updated_at = now() WHERE order_id = $1 AND seq = $2`, orderID, seq, b.From, b.Amount, b.BalanceSun, b.TxID)
	return err
}

// FillBroadcast queues the mark of a fill whose delegation txID was sent.
func (w *Writes) FillBroadcast(orderID string, seq int, txID string) {
	w.queue(`UPDATE order_fills SET state = 'broadcast', delegate_txid = $3, updated_at = now()
				WHERE order_id = $1 AND seq = $2`, orderID, seq, txID)
}

// broadcastHashesSQL reads an order's fills by its key, the state in the aggregate
// (pg/plans.go).
const broadcastHashesSQL = `SELECT coalesce(array_agg(delegate_txid ORDER BY seq) FILTER (WHERE state = 'broadcast'), '{}')
		FROM order_fills WHERE order_id = $1`

// BroadcastHashes queues the read of the delegation hashes of the order's broadcast fills,
// in fill order; the answer is there once the writes were sent.
func (w *Writes) BroadcastHashes(orderID string) *[]string {
	hashes := new([]string)
	w.queue(broadcastHashesSQL, orderID).QueryRow(func(r pgx.Row) error { return r.Scan(hashes) })
	return hashes
}

// OnlyProviderFills reports whether the order has fills and none of them is a pool's.
func OnlyProviderFills(ctx context.Context, q Querier, orderID string) (bool, error) {
	var only bool
	err := q.QueryRow(ctx, `SELECT coalesce(bool_and(source <> 'pool'), false) FROM order_fills WHERE order_id = $1`, orderID).Scan(&only)
	return only, err
}

// ReturnFills marks the order's landed fills returned: their stake is back.
func ReturnFills(ctx context.Context, tx pgx.Tx, orderID string) error {
	_, err := tx.Exec(ctx, `UPDATE order_fills SET state = 'returned', updated_at = now() WHERE order_id = $1 AND state = 'landed'`, orderID)
	return err
}
