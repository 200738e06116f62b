package deposits

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rental/schemas/events"
)

// This file holds the operations on the deposits table (one row per transfer to a
// deposit address, unique on (tx_hash, log_index)). The package is its only writer:
// consumers/crediting records and holds transfers, infra/ledgerstore marks them credited.
// Statuses are the ledger's (schemas/ledger.Status*).

// Execer runs a statement: a pool or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Transfer is one transfer to a deposit address as a chain fact reports it.
type Transfer struct {
	TxHash    string
	LogIndex  int // -1 for a TRX transfer
	FactID    string
	BlockNum  int64
	BlockID   string
	BlockTime time.Time
	AccountID string
	Address   string // the deposit address
	Sender    string
	Asset     string // TRX or USDT
	Amount    string // decimal: SUN for TRX, token units for USDT
}

// Recorded returns the status and fact id of the transfer's row; found is false when the
// transfer has none.
func Recorded(ctx context.Context, q Querier, txHash string, logIndex int) (status, factID string, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT status, fact_id FROM deposits WHERE tx_hash = $1 AND log_index = $2`, txHash, logIndex).
		Scan(&status, &factID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	return status, factID, err == nil, err
}

// Record stores the transfer as a pending deposit, or takes up its row when an earlier
// inclusion of it was reverted or orphaned (under another fact id). ok false means the row
// is there and live: a concurrent or earlier handler applied this transfer already.
func Record(ctx context.Context, tx pgx.Tx, t Transfer) (id string, ok bool, err error) {
	err = tx.QueryRow(ctx, `INSERT INTO deposits (id, tx_hash, log_index, fact_id, block_num, block_id, block_time,
			account_id, address, sender, asset, amount, status)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'pending')
		ON CONFLICT (tx_hash, log_index) DO UPDATE SET fact_id = EXCLUDED.fact_id, block_num = EXCLUDED.block_num,
			block_id = EXCLUDED.block_id, block_time = EXCLUDED.block_time, status = 'pending', credited_sun = NULL,
			rate_sun = NULL, rate_source = NULL, spread_bps = NULL, posting_ref = NULL, credited_at = NULL, updated_at = now()
		WHERE deposits.status IN ('reverted', 'orphaned') AND deposits.fact_id <> EXCLUDED.fact_id
		RETURNING id`,
		events.NewID("dep"), t.TxHash, t.LogIndex, t.FactID, t.BlockNum, t.BlockID, t.BlockTime.UTC(),
		t.AccountID, t.Address, t.Sender, t.Asset, t.Amount).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	return id, err == nil, err
}

// SetStatus moves the deposit to status: held_* (not credited automatically), residual,
// orphaned (its block left the chain before it was confirmed) or reverted (a fork took its
// block away). Crediting is MarkCredited.
func SetStatus(ctx context.Context, db Execer, id, status string) error {
	_, err := db.Exec(ctx, `UPDATE deposits SET status = $2, updated_at = now() WHERE id = $1`, id, status)
	return err
}

// Locked is a deposit row read under its row lock.
type Locked struct {
	ID, AccountID, Status string
	CreditedSun           *int64
}

// LockByFact locks the deposit whose current inclusion is factID; found is false when
// there is none (not a deposit, or taken up by a later inclusion already).
func LockByFact(ctx context.Context, tx pgx.Tx, factID string) (d Locked, found bool, err error) {
	err = tx.QueryRow(ctx, `SELECT id, account_id, status, credited_sun FROM deposits WHERE fact_id = $1 FOR UPDATE`, factID).
		Scan(&d.ID, &d.AccountID, &d.Status, &d.CreditedSun)
	if errors.Is(err, pgx.ErrNoRows) {
		return Locked{}, false, nil
	}
	return d, err == nil, err
}

// Announced reports whether balance.credited was sent for the deposit already (by an
// earlier inclusion of the same transfer).
func Announced(ctx context.Context, q Querier, id string) (bool, error) {
	var announced bool
	err := q.QueryRow(ctx, `SELECT announced FROM deposits WHERE id = $1`, id).Scan(&announced)
	return announced, err
}

// Credited is how a deposit was credited.
type Credited struct {
	ID         string
	Sun        int64   // credited to the balance
	RateSun    *int64  // USDT: SUN per USDT after the spread
	RateSource *string // USDT
	SpreadBps  *int    // USDT
	PostingRef string  // the ledger posting
	By         string  // "crediting" or "support:<who>"
}

// MarkCredited records the credit on the deposit (status credited, announced).
func MarkCredited(ctx context.Context, db Execer, c Credited) error {
	_, err := db.Exec(ctx, `UPDATE deposits SET status = 'credited', credited_sun = $2, rate_sun = $3, rate_source = $4,
		spread_bps = $5, posting_ref = $6, credited_at = now(), credited_by = $7, announced = true, updated_at = now() WHERE id = $1`,
		c.ID, c.Sun, c.RateSun, c.RateSource, c.SpreadBps, c.PostingRef, c.By)
	return err
}
