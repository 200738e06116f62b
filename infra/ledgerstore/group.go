package ledgerstore

import (
	"context"
	"errors"
	"fmt"
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
