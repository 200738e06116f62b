// Package paystore is the store of pay by transfer (docs/pricing.md "Pay by transfer"):
// the only writer of `payments` (one row per transfer to a payment address, unique on the
// transaction id), `payment_cursor` and `payment_blocks` (the payment follower's cursor
// and its window of block ids for fork detection). The money of a payment moves in the
// ledger (infra/ledgerstore) and its delivery is an order (infra/acceptance,
// processors/orderflow); this store keeps what links them: the transfer, the order, the
// refund transaction and the status.
package paystore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/pg"
	"rental/schemas/network"
	"rental/schemas/payments"
)

// ErrNotFound is a transaction id with no payment.
var ErrNotFound = errors.New("paystore: no payment with this transaction id")

// ErrCursorMoved is a commit whose cursor no longer is the one the caller read (another
// follower committed first); the caller reloads.
var ErrCursorMoved = errors.New("paystore: the payment cursor moved")

// Payment is one transfer to a payment address.
type Payment struct {
	TxID      string
	Network   network.Network
	Address   string
	RowKey    string
	Sender    string
	Receiver  string
	Memo      *string
	Asset     string
	AmountSun int64
	BlockNum  int64
	BlockID   string
	BlockTime time.Time
	TxExpires time.Time

	Status      string
	OrderID     *string
	OrderAmount *int64
	PriceSun    *int64
	KeptSun     int64
	RefundSun   int64
	Reason      *string
	RefundTxID  *string
	Settled     bool
	OrphanedAt  *time.Time
	SeenAt      time.Time
	DeliveredAt *time.Time
	UpdatedAt   time.Time
}

// Store is the payments store of one network.
type Store struct {
	pool *pgxpool.Pool
	net  network.Network
}

// New returns the store of network net.
func New(pool *pgxpool.Pool, net network.Network) *Store { return &Store{pool: pool, net: net} }

// Pool is the store's pool (the processor runs ledger and order writes in its transactions).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

const cols = `txid, network, address, row_key, sender, receiver, memo, asset, amount_sun, block_num, block_id, block_time,
	tx_expires, status, order_id, order_amount, price_sun, kept_sun, refund_sun, reason, refund_txid, settled, orphaned_at,
	seen_at, delivered_at, updated_at`

func scan(r pgx.Row) (Payment, error) {
	var p Payment
	var nw string
	err := r.Scan(&p.TxID, &nw, &p.Address, &p.RowKey, &p.Sender, &p.Receiver, &p.Memo, &p.Asset, &p.AmountSun, &p.BlockNum,
		&p.BlockID, &p.BlockTime, &p.TxExpires, &p.Status, &p.OrderID, &p.OrderAmount, &p.PriceSun, &p.KeptSun, &p.RefundSun,
		&p.Reason, &p.RefundTxID, &p.Settled, &p.OrphanedAt, &p.SeenAt, &p.DeliveredAt, &p.UpdatedAt)
	p.Network = network.Network(nw)
	return p, err
}

// Cursor is the last block whose payments are committed.
type Cursor struct {
	Num int64
	ID  string
}

// LoadCursor returns the stored cursor; ok is false before the first commit.
func (s *Store) LoadCursor(ctx context.Context) (c Cursor, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT block_num, block_id FROM payment_cursor WHERE network = $1`, string(s.net)).Scan(&c.Num, &c.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Cursor{}, false, nil
	}
	return c, err == nil, err
}

// BlockID is the stored id of block num in the window ("" when not kept).
func (s *Store) BlockID(ctx context.Context, num int64) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT block_id FROM payment_blocks WHERE network = $1 AND block_num = $2`, string(s.net), num).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// Block is one block read by the follower with the payments it holds.
type Block struct {
	Num      int64
	ID       string
	Payments []Payment
}

// Commit records blocks (in ascending order, the first one following from) and their
// payments, keeps the newest window block ids, and moves the cursor to the last block, in
// one transaction: a crash re-reads the blocks, and a payment already recorded (the same
// transaction read again, or included again after a fork) keeps its row and state, with
// its block updated and its orphan mark cleared. from is the cursor the caller read (ok
// false: none yet); another follower's commit in between is ErrCursorMoved.
func (s *Store) Commit(ctx context.Context, from Cursor, had bool, blocks []Block, window int) error {
	if len(blocks) == 0 {
		return nil
	}
	return pg.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var cur Cursor
		err := tx.QueryRow(ctx, `SELECT block_num, block_id FROM payment_cursor WHERE network = $1 FOR UPDATE`, string(s.net)).Scan(&cur.Num, &cur.ID)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if had {
				return ErrCursorMoved
			}
		case err != nil:
			return err
		case !had || cur != from:
			return ErrCursorMoved
		}
		b := &pgx.Batch{}
		for _, bl := range blocks {
			b.Queue(`INSERT INTO payment_blocks (network, block_num, block_id) VALUES ($1, $2, $3)
				ON CONFLICT (network, block_num) DO UPDATE SET block_id = EXCLUDED.block_id`, string(s.net), bl.Num, bl.ID)
			for _, p := range bl.Payments {
				b.Queue(`INSERT INTO payments (txid, network, address, row_key, sender, receiver, memo, asset, amount_sun, block_num,
					block_id, block_time, tx_expires, status, reason)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
					ON CONFLICT (txid) DO UPDATE SET block_num = EXCLUDED.block_num, block_id = EXCLUDED.block_id,
						block_time = EXCLUDED.block_time, orphaned_at = NULL,
						status = CASE WHEN payments.status = 'reverted' THEN 'seen' ELSE payments.status END,
						reason = CASE WHEN payments.status = 'reverted' THEN NULL ELSE payments.reason END,
						updated_at = now()`,
					p.TxID, string(s.net), p.Address, p.RowKey, p.Sender, p.Receiver, p.Memo, p.Asset, p.AmountSun, bl.Num,
					bl.ID, p.BlockTime, p.TxExpires, p.Status, p.Reason)
			}
		}
		last := blocks[len(blocks)-1]
		b.Queue(`DELETE FROM payment_blocks WHERE network = $1 AND block_num <= $2`, string(s.net), last.Num-int64(window))
		b.Queue(`INSERT INTO payment_cursor (network, block_num, block_id) VALUES ($1, $2, $3)
			ON CONFLICT (network) DO UPDATE SET block_num = EXCLUDED.block_num, block_id = EXCLUDED.block_id, updated_at = now()`,
			string(s.net), last.Num, last.ID)
		return tx.SendBatch(ctx, b).Close()
	})
}

// Rewind moves the cursor back to the common ancestor of a fork and marks the payments of
// the orphaned blocks: one not acted on yet becomes reverted; one acted on keeps its state
// and gets orphaned_at (the processor reclaims or refunds nothing until it knows whether
// the transfer comes back). It returns how many payments it marked.
func (s *Store) Rewind(ctx context.Context, from Cursor, to Cursor) (int, error) {
	n := 0
	err := pg.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var cur Cursor
		if err := tx.QueryRow(ctx, `SELECT block_num, block_id FROM payment_cursor WHERE network = $1 FOR UPDATE`, string(s.net)).Scan(&cur.Num, &cur.ID); err != nil {
			return err
		}
		if cur != from {
			return ErrCursorMoved
		}
		t1, err := tx.Exec(ctx, `UPDATE payments SET status = 'reverted', reason = $3, updated_at = now()
			WHERE network = $1 AND block_num > $2 AND status = 'seen'`, string(s.net), to.Num, payments.ReasonReverted)
		if err != nil {
			return err
		}
		t2, err := tx.Exec(ctx, `UPDATE payments SET orphaned_at = now(), updated_at = now()
			WHERE network = $1 AND block_num > $2 AND status NOT IN ('seen', 'reverted') AND orphaned_at IS NULL`, string(s.net), to.Num)
		if err != nil {
			return err
		}
		n = int(t1.RowsAffected() + t2.RowsAffected())
		if _, err := tx.Exec(ctx, `DELETE FROM payment_blocks WHERE network = $1 AND block_num > $2`, string(s.net), to.Num); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE payment_cursor SET block_num = $2, block_id = $3, updated_at = now() WHERE network = $1`,
			string(s.net), to.Num, to.ID)
		return err
	})
	return n, err
}

// Get reads one payment by its transaction id.
func (s *Store) Get(ctx context.Context, txid string) (Payment, error) {
	p, err := scan(s.pool.QueryRow(ctx, `SELECT `+cols+` FROM payments WHERE txid = $1 AND network = $2`, txid, string(s.net)))
	if errors.Is(err, pgx.ErrNoRows) {
		return Payment{}, ErrNotFound
	}
	return p, err
}

// View is GET /v1/payments/{txid}: the payment with its order's delegation and end.
type View struct {
	Payment
	DelegateHashes []string
	ExpiresAt      *time.Time
	OrderStatus    *string
}

// Look reads the payment and its order's delegation hashes and expiry (one statement).
func (s *Store) Look(ctx context.Context, txid string) (View, error) {
	var v View
	row := s.pool.QueryRow(ctx, `SELECT `+prefixed("p.")+`, o.delegate_hashes, o.expires_at, o.status
		FROM payments p LEFT JOIN orders o ON o.id = p.order_id WHERE p.txid = $1 AND p.network = $2`, txid, string(s.net))
	p := &v.Payment
	var nw string
	err := row.Scan(&p.TxID, &nw, &p.Address, &p.RowKey, &p.Sender, &p.Receiver, &p.Memo, &p.Asset, &p.AmountSun, &p.BlockNum,
		&p.BlockID, &p.BlockTime, &p.TxExpires, &p.Status, &p.OrderID, &p.OrderAmount, &p.PriceSun, &p.KeptSun, &p.RefundSun,
		&p.Reason, &p.RefundTxID, &p.Settled, &p.OrphanedAt, &p.SeenAt, &p.DeliveredAt, &p.UpdatedAt, &v.DelegateHashes, &v.ExpiresAt, &v.OrderStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return View{}, ErrNotFound
	}
	if err != nil {
		return View{}, err
	}
	p.Network = network.Network(nw)
	return v, nil
}

func prefixed(p string) string {
	return p + `txid, ` + p + `network, ` + p + `address, ` + p + `row_key, ` + p + `sender, ` + p + `receiver, ` + p + `memo, ` +
		p + `asset, ` + p + `amount_sun, ` + p + `block_num, ` + p + `block_id, ` + p + `block_time, ` + p + `tx_expires, ` +
		p + `status, ` + p + `order_id, ` + p + `order_amount, ` + p + `price_sun, ` + p + `kept_sun, ` + p + `refund_sun, ` +
		p + `reason, ` + p + `refund_txid, ` + p + `settled, ` + p + `orphaned_at, ` + p + `seen_at, ` + p + `delivered_at, ` + p + `updated_at`
}
