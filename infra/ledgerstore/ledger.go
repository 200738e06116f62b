// Package ledger is the Postgres side of the double-entry ledger (docs/ledger.md): customer
// balances with two-phase holds, idempotent postings, lifetime totals, balance.credited and
// balance.low through the transactional outbox, and the invariants check. The domain rules
// (posting kinds and legs, amount checks, funds errors) live in rental/schemas/ledger.
//
// Transaction contract. Every method that changes money takes the caller's pgx.Tx, and a
// refused operation (4001, 4002, an unknown hold) leaves the caller's transaction exactly
// as it was, so the caller may still commit other work: PlaceHold by writing nothing
// before its checks pass, the others inside a savepoint.
// Events are written to the outbox in the same transaction, so they exist exactly when the
// change commits. The order pipeline calls PlaceHold, CaptureHold, ReleaseHold, Refund and
// AddOrderTotals inside its own order transaction.
//
// Concurrency. Every debit of available money is one conditional UPDATE of the account's
// ledger_accounts row ("... WHERE balance_sun - reserved_sun >= $amount"), never a read then
// a write: Postgres re-evaluates the condition on the latest row version after waiting for
// a concurrent writer, so concurrent holds can never overdraw. Under SERIALIZABLE callers a
// collision surfaces as 4004 ledger_conflict (retry at once).
package ledgerstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/accounts"
	"rental/infra/outbox"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/ledger"
	"rental/schemas/network"
)

// Errors of hold operations that are caller mistakes rather than customer answers.
var (
	ErrHoldNotFound = errors.New("ledger: no such hold")
	ErrHoldClosed   = errors.New("ledger: hold is already closed differently")
	ErrRefReused    = errors.New("ledger: reference already used for a different movement")
)

// OrderPricer gives the price of a reference order, for balance.low's
// estimated_orders_remaining.
type OrderPricer interface {
	OrderSun(ctx context.Context) (int64, error)
}

// FixedOrderPrice is an OrderPricer with a constant price.
type FixedOrderPrice int64

// OrderSun implements OrderPricer.
func (f FixedOrderPrice) OrderSun(context.Context) (int64, error) { return int64(f), nil }

// Defaults.
const (
	// DefaultLowThresholdSun is the balance.low threshold of accounts without their own: 10 TRX.
	DefaultLowThresholdSun = 10_000_000
	// DefaultOrderSun prices the reference order of estimated_orders_remaining when no price
	// source is wired: 65,000 energy (one USDT transfer to a holder) for 1 h at 90 SUN.
	DefaultOrderSun = 65_000 * 90
	// DefaultHoldTTL is how long a placed hold counts as live for the invariants check.
	DefaultHoldTTL = time.Hour
)

// Options configure a Ledger.
type Options struct {
	Network         network.Network // required: the network of emitted events
	LowThresholdSun int64           // default DefaultLowThresholdSun
	Prices          OrderPricer     // default FixedOrderPrice(DefaultOrderSun)
	HoldTTL         time.Duration   // default DefaultHoldTTL
	Now             func() time.Time
}

// Ledger reads and writes the ledger tables.
type Ledger struct {
	pool *pgxpool.Pool
	o    Options
}

// New checks the options.
func New(pool *pgxpool.Pool, o Options) (*Ledger, error) {
	if pool == nil {
		return nil, errors.New("ledger: pool is required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if o.LowThresholdSun <= 0 {
		o.LowThresholdSun = DefaultLowThresholdSun
	}
	if o.Prices == nil {
		o.Prices = FixedOrderPrice(DefaultOrderSun)
	}
	if o.HoldTTL <= 0 {
		o.HoldTTL = DefaultHoldTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Ledger{pool: pool, o: o}, nil
}

// Pool is the ledger's pool, for callers that run a transaction across stores.
func (l *Ledger) Pool() *pgxpool.Pool { return l.pool }

// Network is the network events are emitted for.
func (l *Ledger) Network() network.Network { return l.o.Network }

// inSavepoint runs fn in a savepoint of tx, released on success and rolled back on error,
// and maps serialisation failures and deadlocks to 4004 ledger_conflict.
func inSavepoint(ctx context.Context, tx pgx.Tx, fn func(pgx.Tx) error) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return conflict(err)
	}
	if err := fn(sp); err != nil {
		_ = sp.Rollback(ctx)
		return conflict(err)
	}
	return conflict(sp.Commit(ctx))
}

func conflict(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") {
		return apierr.LedgerConflict.Wrap(err, "a concurrent debit of the same account collided; nothing was charged")
	}
	return err
}

// row is the part of ledger_accounts the low-balance rule needs after a change.
type row struct {
	balance, reserved int64
	threshold         *int64
	alerted           bool
}

const rowCols = `balance_sun, reserved_sun, low_threshold_sun, low_alerted`

func scanRow(r pgx.Row) (row, error) {
	var x row
	err := r.Scan(&x.balance, &x.reserved, &x.threshold, &x.alerted)
	return x, err
}

// ensureAccount creates the account's ledger row if missing (no-op otherwise).
func ensureAccount(ctx context.Context, tx pgx.Tx, accountID string) error {
	_, err := tx.Exec(ctx, `INSERT INTO ledger_accounts (account_id) VALUES ($1) ON CONFLICT (account_id) DO NOTHING`, accountID)
	return err
}

// PlaceHold reserves amountSun of the account's available balance under holdRef (the order
// id, normally). It is idempotent on holdRef: repeating it with the same account and amount
// changes nothing and returns nil; reusing holdRef for something else is ErrRefReused.
// Refusals are *apierr.Error 4001 insufficient_funds or 4002 balance_reserved with
// details.required_sun and details.available_sun.
func (l *Ledger) PlaceHold(ctx context.Context, tx pgx.Tx, accountID, holdRef string, amountSun int64) error {
	return l.placeHold(ctx, tx, accountID, holdRef, amountSun, 0)
}

func (l *Ledger) placeHold(ctx context.Context, tx pgx.Tx, accountID, holdRef string, amountSun, orders int64) error {
	b := &pgx.Batch{}
	q, err := l.queueHold(b, accountID, holdRef, amountSun, orders)
	if err != nil {
		return err
	}
	return q.Result(ctx, tx, tx.SendBatch(ctx, b).Close())
}

// QueuedHold is a hold placement sent in a pgx.Batch with other statements (one round trip
// for all). Statements queued after it run whether or not it reserved anything: the caller
// must check Result before relying on the hold, and roll back on its error.
type QueuedHold struct {
	l              *Ledger
	accountID, ref string
	amount         int64
	placed         bool
	row            row
}

// QueueOrderHold queues the hold of a new order in b: PlaceHold that also counts the order
// in the account's lifetime orders_created (AddOrderTotals) in the same statement, since
// order creation is the hot path (a repeat, the hold existing, counts nothing). Invalid
// arguments are refused at once.
func (l *Ledger) QueueOrderHold(b *pgx.Batch, accountID, orderID string, amountSun int64) (*QueuedHold, error) {
	return l.queueHold(b, accountID, orderID, amountSun, 1)
}

func (l *Ledger) queueHold(b *pgx.Batch, accountID, holdRef string, amountSun, orders int64) (*QueuedHold, error) {
	if err := ledger.ValidateAmount(amountSun); err != nil {
		return nil, err
	}
	if err := ledger.ValidateRef(holdRef); err != nil {
		return nil, err
	}
	q := &QueuedHold{l: l, accountID: accountID, ref: holdRef, amount: amountSun}
	// One statement reserves and writes the hold: a refusal writes nothing, so the caller's
	// transaction stays usable without a savepoint (this is on the order creation path,
	// where every round trip counts). The reservation is skipped when the hold exists
	// already (a repeat); a concurrent first placement of the same ref loses on the
	// hold's primary key and gets 4004.
	now := l.o.Now().UTC()
	b.Queue(`WITH a AS (
			UPDATE ledger_accounts SET reserved_sun = reserved_sun + $2, orders_created = orders_created + $6, updated_at = now()
			WHERE account_id = $1 AND balance_sun - reserved_sun >= $2
			  AND NOT EXISTS (SELECT 1 FROM ledger_holds WHERE ref = $3)
			RETURNING `+rowCols+`
		), h AS (
			INSERT INTO ledger_holds (ref, account_id, amount_sun, status, placed_at, expires_at)
			SELECT $3, $1, $2, 'placed', $4, $5 FROM a
		)
		SELECT `+rowCols+` FROM a`, accountID, amountSun, holdRef, now, now.Add(l.o.HoldTTL), orders).
		Query(func(rows pgx.Rows) error {
			defer rows.Close()
			if rows.Next() {
				r, err := scanRow(rows)
				if err != nil {
					return err
				}
				q.placed, q.row = true, r
			}
			return rows.Err()
		})
	return q, nil
}

// Result finishes the placement after its batch ran (batchErr is the batch's error): nil
// when the hold is placed (or was placed before with the same account and amount), 4001 or
// 4002 when the balance cannot cover it, ErrRefReused, or 4004 on a collision.
func (q *QueuedHold) Result(ctx context.Context, tx pgx.Tx, batchErr error) error {
	if batchErr != nil {
		var pe *pgconn.PgError
		if errors.As(batchErr, &pe) && pe.Code == "23505" {
			return apierr.LedgerConflict.Wrap(batchErr, "the same hold was being placed concurrently; nothing was charged")
		}
		return conflict(batchErr)
	}
	if q.placed {
		return q.l.checkLow(ctx, tx, q.accountID, q.row)
	}
	var acc string
	var amt int64
	err := tx.QueryRow(ctx, `SELECT account_id, amount_sun FROM ledger_holds WHERE ref = $1`, q.ref).Scan(&acc, &amt)
	switch {
	case err == nil && (acc != q.accountID || amt != q.amount):
		return fmt.Errorf("%w: hold %s", ErrRefReused, q.ref)
	case err == nil:
		return nil // placed before: a repeat changes nothing
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	var bal, res int64
	err = tx.QueryRow(ctx, `SELECT balance_sun, reserved_sun FROM ledger_accounts WHERE account_id = $1`, q.accountID).Scan(&bal, &res)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return ledger.FundsError(bal, res, q.amount)
}

// captureHoldSQL and releaseHoldSQL close a placed hold, found by its key, the status a
// guard (pg/plans.go).
const (
	captureHoldSQL = `UPDATE ledger_holds SET status = 'captured', captured_sun = $2, closed_at = now()
		WHERE ref = $1 AND (status = 'placed') IS TRUE AND amount_sun >= $2 RETURNING account_id, amount_sun`
	releaseHoldSQL = `UPDATE ledger_holds SET status = 'released', closed_at = now()
		WHERE ref = $1 AND (status = 'placed') IS TRUE RETURNING account_id, amount_sun`
)

// CaptureHold posts a placed hold for amountSun (0 to the held amount): that much moves
// from the customer to revenue and the rest of the hold is released. Repeating a capture
// with the same amount is a no-op.
func (l *Ledger) CaptureHold(ctx context.Context, tx pgx.Tx, holdRef string, amountSun int64) error {
	if amountSun < 0 || amountSun > ledger.MaxAmountSun {
		return ledger.ErrAmount
	}
	// Two round trips (it is on every delivered order's path): the savepoint with the hold's
	// update, then the account's update with the posting. The savepoint is rolled back when
	// the second finds something wrong, so a refusal leaves tx as it was; on success it is
	// left to the caller's commit (releasing it would cost a third round trip).
	const sp = "ledger_capture"
	var accountID string
	var held int64
	captured := false
	b := &pgx.Batch{}
	b.Queue("SAVEPOINT " + sp)
	b.Queue(captureHoldSQL, holdRef, amountSun).QueryRow(func(r pgx.Row) error {
		err := r.Scan(&accountID, &held)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		captured = err == nil
		return err
	})
	undo := func(err error) error {
		if _, rerr := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+sp); rerr != nil {
			return errors.Join(err, rerr)
		}
		return conflict(err)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return undo(err)
	}
	if !captured {
		return holdReplay(ctx, tx, holdRef, "captured", &amountSun)
	}
	// The reservation is the guard: the hold was placed against available money. The
	// balance may still have fallen below it since (a deposit reversed by a fork), and
	// the capture must go through all the same, or the order could never finish; a
	// negative available balance is how the invariants surface that for an operator.
	var r row
	covered := false
	b = &pgx.Batch{}
	b.Queue(`UPDATE ledger_accounts
		SET reserved_sun = reserved_sun - $2, balance_sun = balance_sun - $3, spent_sun = spent_sun + $3, updated_at = now()
		WHERE account_id = $1 AND reserved_sun >= $2
		RETURNING `+rowCols, accountID, held, amountSun).QueryRow(func(q pgx.Row) error {
		var err error
		r, err = scanRow(q)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		covered = err == nil
		return err
	})
	p := posting{kind: ledger.KindCapture, ref: "capture:" + holdRef, accountID: accountID, amount: amountSun, referenceID: holdRef}
	var posted *queuedPosting
	if amountSun > 0 {
		var err error
		if posted, err = queuePosting(b, p); err != nil {
			return undo(err)
		}
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return undo(err)
	}
	if !covered {
		return undo(fmt.Errorf("ledger: hold %s of %d SUN is not covered by the reservation of %s", holdRef, held, accountID))
	}
	if posted != nil {
		if err := posted.check(ctx, tx); err != nil {
			return undo(err)
		}
	}
	return l.checkLow(ctx, tx, accountID, r)
}

// ReleaseHold voids a placed hold: its whole amount becomes available again. Releasing a
// released hold is a no-op; releasing a captured one is ErrHoldClosed (use Refund).
func (l *Ledger) ReleaseHold(ctx context.Context, tx pgx.Tx, holdRef string) error {
	return inSavepoint(ctx, tx, func(tx pgx.Tx) error {
		var accountID string
		var held int64
		err := tx.QueryRow(ctx, releaseHoldSQL, holdRef).Scan(&accountID, &held)
		if errors.Is(err, pgx.ErrNoRows) {
			return holdReplay(ctx, tx, holdRef, "released", nil)
		}
		if err != nil {
			return err
		}
		r, err := scanRow(tx.QueryRow(ctx, `UPDATE ledger_accounts SET reserved_sun = reserved_sun - $2, updated_at = now()
			WHERE account_id = $1 AND reserved_sun >= $2 RETURNING `+rowCols, accountID, held))
		if err != nil {
			return fmt.Errorf("ledger: release %s: %w", holdRef, err)
		}
		return l.checkLow(ctx, tx, accountID, r)
	})
}

// holdReplay decides what a capture or release that changed no row means: a repeat of the
// same operation (nil), or a mistake.
func holdReplay(ctx context.Context, tx pgx.Tx, ref, wantStatus string, wantCaptured *int64) error {
	var status string
	var captured *int64
	err := tx.QueryRow(ctx, `SELECT status, captured_sun FROM ledger_holds WHERE ref = $1`, ref).Scan(&status, &captured)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrHoldNotFound, ref)
	}
	if err != nil {
		return err
	}
	if status == "placed" && wantCaptured != nil {
		return fmt.Errorf("ledger: capture of %d SUN exceeds hold %s: %w", *wantCaptured, ref, ledger.ErrAmount)
	}
	if status != wantStatus || (wantCaptured != nil && (captured == nil || *captured != *wantCaptured)) {
		return fmt.Errorf("%w: hold %s is %s", ErrHoldClosed, ref, status)
	}
	return nil
}

// Refund credits amountSun back to the account (kind refund: revenue -> customer) and emits
// balance.credited with reason refund and reference_id = referenceID (the reversed order) in
// the same transaction. reason is the internal cause (order.refunded's reason, or
// order_failed), kept in the posting. Idempotent on ref: a repeat credits nothing and emits
// nothing.
func (l *Ledger) Refund(ctx context.Context, tx pgx.Tx, accountID, ref string, amountSun int64, reason, referenceID string) error {
	_, err := l.Credit(ctx, tx, Credit{AccountID: accountID, Kind: ledger.KindRefund, Ref: ref, AmountSun: amountSun,
		ReferenceID: referenceID, Details: map[string]any{"reason": reason}})
	return err
}

// AddOrderTotals adds to the lifetime counters orders_created and energy_delegated. It is
// not idempotent by itself: call it in the transaction that records the order step it
// counts, whose own uniqueness makes the pair happen once.
func (l *Ledger) AddOrderTotals(ctx context.Context, tx pgx.Tx, accountID string, orders, energy int64) error {
	if orders < 0 || energy < 0 {
		return errors.New("ledger: order totals only grow")
	}
	// One statement (it sits on the order creation path): the row is created when missing.
	_, err := tx.Exec(ctx, `INSERT INTO ledger_accounts (account_id, orders_created, energy_delegated) VALUES ($1, $2, $3)
		ON CONFLICT (account_id) DO UPDATE SET orders_created = ledger_accounts.orders_created + EXCLUDED.orders_created,
			energy_delegated = ledger_accounts.energy_delegated + EXCLUDED.energy_delegated, updated_at = now()`,
		accountID, orders, energy)
	return err
}

// DepositInfo is the chain side of a deposit credit, for balance.credited.
type DepositInfo struct {
	TxHash      string
	Sender      string
	BlockNumber int64
	// USDT only: the token units deposited, the rate after spread and its source.
	USDTAmount *string
	RateSun    *int64
	RateSource *string
	SpreadBps  *int
}

// Credit is one crediting movement.
type Credit struct {
	AccountID   string
	Kind        ledger.Kind // deposit, refund, adjustment or referral
	Ref         string      // idempotency reference, unique per kind
	AmountSun   int64
	ReferenceID string         // balance.credited reference_id ("" = null)
	Deposit     *DepositInfo   // kind deposit only
	Details     map[string]any // kept with the posting
	// Quiet suppresses balance.credited: a deposit credited again after a fork reverted
	// its first credit was announced already.
	Quiet bool
}

// CreditResult tells what Credit did.
type CreditResult struct {
	Applied    bool  // false when ref was already posted (nothing changed, no event)
	BalanceSun int64 // balance after the credit (when Applied)
	Activated  bool  // the account went from unfunded to active
}

// Credit adds money to a customer balance: posting, balance and totals, the first-credit
// activation of an unfunded account, balance.credited, and the re-arming of balance.low,
// all in tx. Idempotent on (Kind, Ref).
func (l *Ledger) Credit(ctx context.Context, tx pgx.Tx, c Credit) (CreditResult, error) {
	if !c.Kind.Credited() {
		return CreditResult{}, fmt.Errorf("ledger: %s is not a credit", c.Kind)
	}
	if err := ledger.ValidateAmount(c.AmountSun); err != nil {
		return CreditResult{}, err
	}
	if err := ledger.ValidateRef(c.Ref); err != nil {
		return CreditResult{}, err
	}
	var res CreditResult
	err := inSavepoint(ctx, tx, func(tx pgx.Tx) error {
		ref := string(c.Kind) + ":" + c.Ref
		applied, err := insertPostingOnce(ctx, tx, posting{kind: c.Kind, ref: ref, accountID: c.AccountID, amount: c.AmountSun,
			referenceID: c.ReferenceID, details: c.Details})
		if err != nil || !applied {
			return err
		}
		res.Applied = true
		deposited, refunded := int64(0), int64(0)
		switch c.Kind {
		case ledger.KindDeposit:
			deposited = c.AmountSun
		case ledger.KindRefund:
			refunded = c.AmountSun
		}
		if err := ensureAccount(ctx, tx, c.AccountID); err != nil {
			return err
		}
		r, err := scanRow(tx.QueryRow(ctx, `UPDATE ledger_accounts SET balance_sun = balance_sun + $2,
			deposited_sun = deposited_sun + $3, refunded_sun = refunded_sun + $4, updated_at = now()
			WHERE account_id = $1 RETURNING `+rowCols, c.AccountID, c.AmountSun, deposited, refunded))
		if err != nil {
			return err
		}
		res.BalanceSun = r.balance
		if res.Activated, err = accounts.Activate(ctx, tx, c.AccountID); err != nil {
			return err
		}
		if !c.Quiet {
			if err := l.emitCredited(ctx, tx, c, r.balance); err != nil {
				return err
			}
		}
		return l.checkLow(ctx, tx, c.AccountID, r)
	})
	return res, err
}

func (l *Ledger) emitCredited(ctx context.Context, tx pgx.Tx, c Credit, balance int64) error {
	d := events.BalanceCredited{Reason: c.Kind.Reason(), Currency: "TRX", AmountSun: c.AmountSun, Asset: "TRX"}
	if c.ReferenceID != "" {
		ref := c.ReferenceID
		d.ReferenceID = &ref
	}
	if c.Kind == ledger.KindDeposit && c.Deposit != nil {
		// Semantics 9: a deposit event carries null confirmations and balance_sun.
		dep := c.Deposit
		h, s, b := dep.TxHash, dep.Sender, dep.BlockNumber
		d.TxHash, d.TxID, d.Sender, d.BlockNumber = &h, &h, &s, &b
		if dep.USDTAmount != nil {
			d.Asset = "USDT"
			d.USDTAmount, d.Rate, d.RateSource, d.SpreadBps = dep.USDTAmount, dep.RateSun, dep.RateSource, dep.SpreadBps
		}
	} else {
		bal := balance
		d.BalanceSun = &bal
	}
	env, err := events.New(events.EventBalanceCredited, c.AccountID, l.o.Network, d)
	if err != nil {
		return err
	}
	return outbox.Insert(ctx, tx, env)
}

// ReverseDeposit takes back a credited deposit whose block a fork orphaned (kind
// deposit_reversal, customer -> world). This is the one debit not guarded by the available
// balance: the chain took the money back whether or not it was spent meanwhile. A balance
// driven below zero this way shows up in the invariants check for an operator. Idempotent
// on ref; it emits no customer event.
func (l *Ledger) ReverseDeposit(ctx context.Context, tx pgx.Tx, accountID, ref string, amountSun int64, details map[string]any) error {
	if err := ledger.ValidateAmount(amountSun); err != nil {
		return err
	}
	return inSavepoint(ctx, tx, func(tx pgx.Tx) error {
		applied, err := insertPostingOnce(ctx, tx, posting{kind: ledger.KindDepositReversal, ref: "deposit_reversal:" + ref,
			accountID: accountID, amount: amountSun, details: details})
		if err != nil || !applied {
			return err
		}
		r, err := scanRow(tx.QueryRow(ctx, `UPDATE ledger_accounts SET balance_sun = balance_sun - $2,
			deposited_sun = deposited_sun - $2, updated_at = now()
			WHERE account_id = $1 AND deposited_sun >= $2 RETURNING `+rowCols, accountID, amountSun))
		if err != nil {
			return fmt.Errorf("ledger: reverse deposit %s: %w", ref, err)
		}
		return l.checkLow(ctx, tx, accountID, r)
	})
}

type posting struct {
	kind        ledger.Kind
	ref         string
	accountID   string
	amount      int64
	referenceID string
	details     map[string]any
}

func insertPosting(ctx context.Context, tx pgx.Tx, p posting) error {
	applied, err := insertPostingOnce(ctx, tx, p)
	if err == nil && !applied {
		err = fmt.Errorf("%w: posting %s", ErrRefReused, p.ref)
	}
	return err
}

// queuedPosting is insertPosting queued in a pgx.Batch; check finishes it once the batch ran.
type queuedPosting struct {
	p       posting
	applied bool
}

func queuePosting(b *pgx.Batch, p posting) (*queuedPosting, error) {
	q := &queuedPosting{p: p}
	sql, args, err := postingInsert(p)
	if err != nil {
		return nil, err
	}
	b.Queue(sql, args...).Exec(func(tag pgconn.CommandTag) error {
		q.applied = tag.RowsAffected() == 1
		return nil
	})
	return q, nil
}

// check is insertPosting's answer: nil when written, ErrRefReused when the ref was there.
func (q *queuedPosting) check(ctx context.Context, tx pgx.Tx) error {
	if q.applied {
		return nil
	}
	if _, err := postingRepeat(ctx, tx, q.p); err != nil {
		return err
	}
	return fmt.Errorf("%w: posting %s", ErrRefReused, q.p.ref)
}

// insertPostingOnce inserts the posting unless its ref exists; applied is false for a repeat
// of the same movement, and ErrRefReused when the ref names a different one.
func insertPostingOnce(ctx context.Context, tx pgx.Tx, p posting) (bool, error) {
	sql, args, err := postingInsert(p)
	if err != nil {
		return false, err
	}
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		return false, err
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	return postingRepeat(ctx, tx, p)
}

// postingInsert is the statement inserting p unless its ref exists.
func postingInsert(p posting) (string, []any, error) {
	debit, credit, err := ledger.Legs(p.kind, p.accountID)
	if err != nil {
		return "", nil, err
	}
	if p.details == nil {
		p.details = map[string]any{}
	}
	var refID *string
	if p.referenceID != "" {
		refID = &p.referenceID
	}
	return `INSERT INTO ledger_postings (ref, kind, debit, credit, amount_sun, account_id, reference_id, details)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (ref) DO NOTHING`,
		[]any{p.ref, string(p.kind), debit, credit, p.amount, p.accountID, refID, p.details}, nil
}

// postingRepeat judges a posting whose ref existed: the same movement again (false, nil)
// or ErrRefReused.
func postingRepeat(ctx context.Context, tx pgx.Tx, p posting) (bool, error) {
	var acc string
	var amt int64
	if err := tx.QueryRow(ctx, `SELECT account_id, amount_sun FROM ledger_postings WHERE ref = $1`, p.ref).Scan(&acc, &amt); err != nil {
		return false, err
	}
	if acc != p.accountID || amt != p.amount {
		return false, fmt.Errorf("%w: posting %s", ErrRefReused, p.ref)
	}
	return false, nil
}

// checkLow applies the balance.low rule after a change of the account's row: when the
// available balance is below the threshold and the alert has not fired since it last stood
// at or above it, emit balance.low; when it is back at or above, re-arm.
func (l *Ledger) checkLow(ctx context.Context, tx outbox.Execer, accountID string, r row) error {
	threshold := l.threshold(r)
	available := r.balance - r.reserved
	switch {
	case available < threshold && !r.alerted:
		if _, err := tx.Exec(ctx, `UPDATE ledger_accounts SET low_alerted = true WHERE account_id = $1`, accountID); err != nil {
			return err
		}
		price, err := l.o.Prices.OrderSun(ctx)
		if err != nil {
			return fmt.Errorf("ledger: price for balance.low: %w", err)
		}
		env, err := events.New(events.EventBalanceLow, accountID, l.o.Network, events.BalanceLow{
			BalanceSun: available, ThresholdSun: threshold, EstimatedOrdersRemaining: ledger.EstimatedOrders(available, price),
		})
		if err != nil {
			return err
		}
		return outbox.Insert(ctx, tx, env)
	case available >= threshold && r.alerted:
		_, err := tx.Exec(ctx, `UPDATE ledger_accounts SET low_alerted = false WHERE account_id = $1`, accountID)
		return err
	}
	return nil
}

// threshold is the account's balance.low threshold.
func (l *Ledger) threshold(r row) int64 {
	if r.threshold != nil {
		return *r.threshold
	}
	return l.o.LowThresholdSun
}

// lowChanges tells whether checkLow writes anything for r: the alert is set below the
// threshold and cleared at or above it.
func (l *Ledger) lowChanges(r row) bool {
	return (r.balance-r.reserved < l.threshold(r)) != r.alerted
}

// SetLowThreshold sets the account's own balance.low threshold; nil returns it to the
// configured default. With an actor the change is audited (action ledger.low_threshold) in
// the same transaction.
func (l *Ledger) SetLowThreshold(ctx context.Context, accountID string, sun *int64, actor, reason string) error {
	if sun != nil && *sun < 0 {
		return errors.New("ledger: threshold must not be negative")
	}
	return pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if err := ensureAccount(ctx, tx, accountID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE ledger_accounts SET low_threshold_sun = $2, updated_at = now() WHERE account_id = $1`, accountID, sun); err != nil {
			return err
		}
		if actor == "" {
			return nil
		}
		return accounts.WriteAudit(ctx, tx, accountID, actor, "ledger.low_threshold", map[string]any{"threshold_sun": sun, "reason": reason})
	})
}

// Summary is an account's balances and lifetime totals.
type Summary struct {
	BalanceSun, BalanceUSDT, ReservedSun, AvailableSun             int64
	DepositedSun, SpentSun, RefundedSun, OrdersCreated, EnergyUsed int64
	AsOf                                                           time.Time
}

// Summary reads an account's balances and totals; all zero before its first movement.
func (l *Ledger) Summary(ctx context.Context, accountID string) (Summary, error) {
	var s Summary
	err := l.pool.QueryRow(ctx, `SELECT balance_sun, balance_usdt, reserved_sun, deposited_sun, spent_sun, refunded_sun,
			orders_created, energy_delegated, now()
		FROM ledger_accounts WHERE account_id = $1`, accountID).
		Scan(&s.BalanceSun, &s.BalanceUSDT, &s.ReservedSun, &s.DepositedSun, &s.SpentSun, &s.RefundedSun,
			&s.OrdersCreated, &s.EnergyUsed, &s.AsOf)
	if errors.Is(err, pgx.ErrNoRows) {
		return Summary{AsOf: l.o.Now()}, nil
	}
	s.AvailableSun = s.BalanceSun - s.ReservedSun
	return s, err
}
