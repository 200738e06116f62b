package ledgerstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rental/infra/outbox"
	"rental/schemas/ledger"
)

// Group holds: the holds of several new orders placed in one transaction (order creation's
// group commit, docs/orders.md "Group commit"). The caller locks the accounts' rows first
// (QueueLockAccounts), decides from their funds which orders it admits, then places their
// holds in two statements (QueueOrderHolds) and applies the low-balance rule
// (AfterOrderHolds). The row locks make the decision exact: no other hold, capture or
// credit of those accounts can happen between the read and the write.

// Funds are an account's ledger figures read under its row lock.
type Funds struct {
	row
}

// Available is the balance not reserved by holds.
func (f Funds) Available() int64 { return f.balance - f.reserved }

// Error is the refusal (4001 or 4002, with required_sun and available_sun) of a hold of
// requiredSun that the funds cannot cover.
func (f Funds) Error(requiredSun int64) error {
	return ledger.FundsError(f.balance, f.reserved, requiredSun)
}

// LockedAccounts is QueueLockAccounts' answer once its batch ran.
type LockedAccounts struct {
	funds map[string]Funds
}

// Funds returns the account's figures; ok is false for an account without a ledger row
// (it has never been credited and can pay nothing).
func (a *LockedAccounts) Funds(accountID string) (Funds, bool) {
	f, ok := a.funds[accountID]
	return f, ok
}

// QueueLockAccounts queues the row locks of accountIDs (taken in account order, so two
// groups wait for each other instead of deadlocking) and the read of their funds.
func (l *Ledger) QueueLockAccounts(b *pgx.Batch, accountIDs []string) *LockedAccounts {
	ids := slices.Clone(accountIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	q := &LockedAccounts{funds: make(map[string]Funds, len(ids))}
	b.Queue(`SELECT account_id, `+rowCols+` FROM ledger_accounts WHERE account_id = ANY($1::text[])
		ORDER BY account_id FOR UPDATE`, ids).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id string
			var f Funds
			if err := rows.Scan(&id, &f.balance, &f.reserved, &f.threshold, &f.alerted); err != nil {
				return err
			}
			q.funds[id] = f
		}
		return rows.Err()
	})
	return q
}

// Hold is one new order's hold in a group.
type Hold struct {
	AccountID string
	OrderID   string
	AmountSun int64
}

// errHoldsRefused is a hold the locked funds could not cover, found by the statement
// itself: the caller decided wrongly or did not lock. It fails the batch.
var errHoldsRefused = errors.New("ledger: a group hold exceeded the available balance")

// QueueOrderHolds queues the holds of orders admitted under locks taken by
// QueueLockAccounts in the same transaction: each account's reservation and
// orders_created grow by its orders' totals in one UPDATE, and every hold row is written
// by one INSERT. The UPDATE keeps the funds condition, so a caller's mistake fails the
// batch (errHoldsRefused) instead of overdrawing.
func (l *Ledger) QueueOrderHolds(b *pgx.Batch, holds []Hold) error {
	per := map[string][2]int64{} // account: sum, count
	refs, accs, amounts := make([]string, len(holds)), make([]string, len(holds)), make([]int64, len(holds))
	for i, h := range holds {
		if err := ledger.ValidateAmount(h.AmountSun); err != nil {
			return err
		}
		if err := ledger.ValidateRef(h.OrderID); err != nil {
			return err
		}
		t := per[h.AccountID]
		per[h.AccountID] = [2]int64{t[0] + h.AmountSun, t[1] + 1}
		refs[i], accs[i], amounts[i] = h.OrderID, h.AccountID, h.AmountSun
	}
	ids := make([]string, 0, len(per))
	for id := range per {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	sums, counts := make([]int64, len(ids)), make([]int64, len(ids))
	for i, id := range ids {
		sums[i], counts[i] = per[id][0], per[id][1]
	}
	b.Queue(`UPDATE ledger_accounts a SET reserved_sun = a.reserved_sun + u.sum, orders_created = a.orders_created + u.n, updated_at = now()
		FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS u(account_id, sum, n)
		WHERE a.account_id = u.account_id AND a.balance_sun - a.reserved_sun >= u.sum`, ids, sums, counts).
		Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() != int64(len(ids)) {
				return errHoldsRefused
			}
			return nil
		})
	now := l.o.Now().UTC()
	b.Queue(`INSERT INTO ledger_holds (ref, account_id, amount_sun, status, placed_at, expires_at)
		SELECT ref, account_id, amount, 'placed', $4, $5 FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(ref, account_id, amount)`,
		refs, accs, amounts, now, now.Add(l.o.HoldTTL))
	return nil
}

// LowBalanceChanges tells whether placing holds changes the low-balance state of one of
// their accounts (AfterOrderHolds then has writes to make).
func (l *Ledger) LowBalanceChanges(locked *LockedAccounts, holds []Hold) bool {
	for id, r := range l.afterHolds(locked, holds) {
		if _, ok := locked.funds[id]; ok && l.lowChanges(r) {
			return true
		}
	}
	return false
}

// AfterOrderHolds applies the low-balance rule (balance.low once on crossing below the
// threshold) to the accounts of holds, from their funds as locked plus the holds. It
// writes only for an account whose alert state changes. tx is the holds' transaction.
func (l *Ledger) AfterOrderHolds(ctx context.Context, tx outbox.Execer, locked *LockedAccounts, holds []Hold) error {
	for id, r := range l.afterHolds(locked, holds) {
		if _, ok := locked.funds[id]; !ok {
			return fmt.Errorf("ledger: account %s held without its row locked", id)
		}
		if err := l.checkLow(ctx, tx, id, r); err != nil {
			return err
		}
	}
	return nil
}

// afterHolds is each held account's row once holds are placed.
func (l *Ledger) afterHolds(locked *LockedAccounts, holds []Hold) map[string]row {
	after := map[string]row{}
	for _, h := range holds {
		r, ok := after[h.AccountID]
		if !ok {
			r = locked.funds[h.AccountID].row
		}
		r.reserved += h.AmountSun
		after[h.AccountID] = r
	}
	return after
}

// Group captures: the confirmation of several delivered orders in one transaction
// (processors/orderflow, confirmation groups).

// OrderCapture is one order's part of QueueOrderCaptures: its hold (placed for AccountID
// under Ref), the amount posted from it, and the energy it delivered (added to the
// account's lifetime energy_delegated, as AddOrderTotals does).
type OrderCapture struct {
	AccountID string
	Ref       string
	AmountSun int64
	Energy    int64
}

// ErrGroupCapture is QueuedCaptures.Result's answer for a group that is not the plain case.
var ErrGroupCapture = errors.New("ledger: a capture of the group is not the plain case")

// QueuedCaptures is a group of captures sent in a pgx.Batch with other statements.
type QueuedCaptures struct {
	l               *Ledger
	holds, postings int // asked
	accounts        int // distinct accounts asked
	capturedHolds   int64
	writtenPostings int64
	rows            map[string]row // the accounts after the group
}

// QueueOrderCaptures queues in b the confirmation's ledger work for several orders at once:
// for each, CaptureHold of its hold and AddOrderTotals of its energy, as two statements for
// the whole group, the first locking the accounts' rows (QueueLockAccounts). It is all or
// nothing, and only for the plain case: every hold placed for its account with at least
// its amount, every account's reservation covering its holds, no posting ref taken.
// Anything else (a repeat, a mistake) is ErrGroupCapture from Result, after which the
// caller must roll its transaction back and capture one by one (CaptureHold tells those
// cases apart). Invalid arguments are refused at once.
func (l *Ledger) QueueOrderCaptures(b *pgx.Batch, cs []OrderCapture) (*QueuedCaptures, error) {
	n := len(cs)
	refs, accs, debits, postRefs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	amounts, energy := make([]int64, n), make([]int64, n)
	distinct := map[string]bool{}
	q := &QueuedCaptures{l: l, holds: n, rows: map[string]row{}}
	for i, c := range cs {
		if c.AmountSun < 0 || c.AmountSun > ledger.MaxAmountSun || c.Energy < 0 {
			return nil, ledger.ErrAmount
		}
		if err := ledger.ValidateRef(c.Ref); err != nil {
			return nil, err
		}
		debit, _, err := ledger.Legs(ledger.KindCapture, c.AccountID)
		if err != nil {
			return nil, err
		}
		refs[i], accs[i], debits[i], postRefs[i] = c.Ref, c.AccountID, debit, "capture:"+c.Ref
		amounts[i], energy[i] = c.AmountSun, c.Energy
		distinct[c.AccountID] = true
		if c.AmountSun > 0 {
			q.postings++
		}
	}
	q.accounts = len(distinct)
	_, credit, _ := ledger.Legs(ledger.KindCapture, "")
	l.QueueLockAccounts(b, accs)
	b.Queue(groupCaptureSQL,
		refs, accs, amounts, energy, debits, postRefs, string(ledger.KindCapture), credit).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var acc string
			var r row
			if err := rows.Scan(&acc, &r.balance, &r.reserved, &r.threshold, &r.alerted, &q.capturedHolds, &q.writtenPostings); err != nil {
				return err
			}
			q.rows[acc] = r
		}
		return rows.Err()
	})
	return q, nil
}

// groupCaptureSQL captures a group's holds: the hold's whole amount leaves the reservation,
// the captured amount leaves the balance (the rest of the hold is released), as
// CaptureHold does. The holds are found by their key, the status a guard (pg/plans.go).
const groupCaptureSQL = `WITH u AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[], $6::text[])
			AS u(ref, account_id, amount, energy, debit, post_ref)
	), h AS (
		UPDATE ledger_holds h SET status = 'captured', captured_sun = u.amount, closed_at = now()
		FROM u WHERE h.ref = u.ref AND h.account_id = u.account_id AND (h.status = 'placed') IS TRUE AND h.amount_sun >= u.amount
		RETURNING h.account_id, h.amount_sun AS held, u.amount, u.energy
	), s AS (
		SELECT account_id, sum(held) AS held, sum(amount) AS amount, sum(energy) AS energy FROM h GROUP BY account_id
	), a AS (
		UPDATE ledger_accounts a SET reserved_sun = a.reserved_sun - s.held, balance_sun = a.balance_sun - s.amount,
			spent_sun = a.spent_sun + s.amount, energy_delegated = a.energy_delegated + s.energy, updated_at = now()
		FROM s WHERE a.account_id = s.account_id AND a.reserved_sun >= s.held
		RETURNING a.account_id, ` + rowCols + `
	), p AS (
		INSERT INTO ledger_postings (ref, kind, debit, credit, amount_sun, account_id, reference_id, details)
		SELECT post_ref, $7, debit, $8, amount, account_id, ref, '{}' FROM u WHERE amount > 0
		ON CONFLICT (ref) DO NOTHING RETURNING 1
	)
	SELECT a.*, (SELECT count(*) FROM h), (SELECT count(*) FROM p) FROM a`

// Result checks the group after its batch ran (batchErr is the batch's error) and applies
// the balance.low rule to each account. Any error leaves the caller's transaction to be
// rolled back.
func (q *QueuedCaptures) Result(ctx context.Context, tx pgx.Tx, batchErr error) error {
	if batchErr != nil {
		return conflict(batchErr)
	}
	if q.capturedHolds != int64(q.holds) || q.writtenPostings != int64(q.postings) || len(q.rows) != q.accounts {
		return fmt.Errorf("%w: %d of %d holds captured, %d of %d postings written, %d of %d accounts covered", ErrGroupCapture,
			q.capturedHolds, q.holds, q.writtenPostings, q.postings, len(q.rows), q.accounts)
	}
	for _, acc := range slices.Sorted(maps.Keys(q.rows)) {
		if err := q.l.checkLow(ctx, tx, acc, q.rows[acc]); err != nil {
			return err
		}
	}
	return nil
}
