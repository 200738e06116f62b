package ledgerstore

// Support operations behind infra/cmd/admin. Each runs in one transaction together with its
// audit_log row (actor "support:<who>"), so an operation and its record of who did it and
// why commit together or not at all.

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/accounts"
	"rental/schemas/ledger"
)

// ErrNotHeld is returned when crediting a deposit that is not held.
var ErrNotHeld = errors.New("ledger: deposit is not held")

// Actor turns a support person's name into the audit actor "support:<name>".
func Actor(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", errors.New("ledger: an actor (who acts) is required for support operations")
	}
	if strings.HasPrefix(name, "support:") {
		return name, nil
	}
	return "support:" + name, nil
}

// HeldDeposit is a deposit waiting for support.
type HeldDeposit struct {
	ID, AccountID, Address, TxHash, Sender, Asset, Status string
	Amount                                                string // SUN or USDT units
	BlockNum                                              int64
	CreatedAt                                             time.Time
}

// HeldDeposits lists held deposits (all accounts when accountID is ""), oldest first.
func (l *Ledger) HeldDeposits(ctx context.Context, accountID string) ([]HeldDeposit, error) {
	rows, err := l.pool.Query(ctx, `SELECT id, account_id, address, tx_hash, sender, asset, status, amount::text, block_num, created_at
		FROM deposits WHERE (status LIKE 'held_%' OR status = 'residual') AND ($1 = '' OR account_id = $1)
		ORDER BY created_at, id`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (HeldDeposit, error) {
		var h HeldDeposit
		err := r.Scan(&h.ID, &h.AccountID, &h.Address, &h.TxHash, &h.Sender, &h.Asset, &h.Status, &h.Amount, &h.BlockNum, &h.CreatedAt)
		return h, err
	})
}

// CreditHeld credits a held deposit (below or above the USDT range, without a rate, sent to
// a retired address too late, or a TRX residual) on support's decision. A USDT deposit is
// converted at rate (the rate at credit time; support may pass another) minus spreadBps.
// It emits balance.credited like an automatic credit and returns the SUN credited.
func (l *Ledger) CreditHeld(ctx context.Context, depositID, actor, reason string, rate Rate, spreadBps int) (int64, error) {
	var credited int64
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var d DepositCredit
		var status, amount string
		err := tx.QueryRow(ctx, `SELECT id, fact_id, account_id, tx_hash, sender, block_num, asset, amount::text, status
			FROM deposits WHERE id = $1 FOR UPDATE`, depositID).
			Scan(&d.ID, &d.FactID, &d.AccountID, &d.TxHash, &d.Sender, &d.BlockNum, &d.Asset, &amount, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("ledger: no deposit %s", depositID)
		}
		if err != nil {
			return err
		}
		if !ledger.Held(status) {
			return fmt.Errorf("%w: %s is %s", ErrNotHeld, depositID, status)
		}
		d.Amount, _ = new(big.Int).SetString(amount, 10)
		if d.Asset == "USDT" && rate.SunPerUSDT <= 0 {
			return errors.New("ledger: no USDT rate now (USDT_RATE_SOURCE gives none: docs/ledger.md): pass one")
		}
		d.Rate, d.SpreadBps, d.Actor = rate, spreadBps, actor
		d.Details = map[string]any{"held_status": status, "reason": reason}
		if err := l.CreditDeposit(ctx, tx, d); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(credited_sun, 0) FROM deposits WHERE id = $1`, depositID).Scan(&credited); err != nil {
			return err
		}
		return accounts.WriteAudit(ctx, tx, d.AccountID, actor, "deposit.credit_held", map[string]any{
			"deposit_id": depositID, "held_status": status, "asset": d.Asset, "amount": amount, "credited_sun": credited,
			"rate_sun": rate.SunPerUSDT, "rate_source": rate.Source, "reason": reason,
		})
	})
	return credited, err
}

// Adjust credits amountSun to an account as a support adjustment (kind adjustment,
// balance.credited reason adjustment, reference_id ref). Idempotent on ref.
func (l *Ledger) Adjust(ctx context.Context, accountID string, amountSun int64, ref, actor, reason string) (CreditResult, error) {
	var res CreditResult
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var err error
		res, err = l.Credit(ctx, tx, Credit{AccountID: accountID, Kind: ledger.KindAdjustment, Ref: ref, AmountSun: amountSun,
			ReferenceID: ref, Details: map[string]any{"by": actor, "reason": reason}})
		if err != nil || !res.Applied {
			return err
		}
		return accounts.WriteAudit(ctx, tx, accountID, actor, "ledger.adjustment", map[string]any{
			"amount_sun": amountSun, "ref": ref, "reason": reason,
		})
	})
	return res, err
}

// ErrSameOperator refuses an approval by the operator who requested the adjustment.
var ErrSameOperator = errors.New("ledger: an adjustment is approved by another operator than the one who requested it")

// ErrNoPendingAdjustment is an approval of a ref that no request is pending under.
var ErrNoPendingAdjustment = errors.New("ledger: no pending adjustment with this ref")

// RequestAdjustment records an adjustment that waits for a second operator's approval
// (pending_adjustments) and the audit row "ledger.adjustment_requested"; nothing is
// credited. Requesting a ref again with the same account and amount changes nothing
// (pending false when it was approved already); another account or amount under a used ref
// is refused.
func (l *Ledger) RequestAdjustment(ctx context.Context, accountID string, amountSun int64, ref, requester, reason string) (pending bool, err error) {
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO pending_adjustments (ref, account_id, amount_sun, reason, requested_by)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (ref) DO NOTHING`, ref, accountID, amountSun, reason, requester)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var acc string
			var amt int64
			var approved *string
			if err := tx.QueryRow(ctx, `SELECT account_id, amount_sun, approved_by FROM pending_adjustments WHERE ref = $1`, ref).
				Scan(&acc, &amt, &approved); err != nil {
				return err
			}
			if acc != accountID || amt != amountSun {
				return fmt.Errorf("ledger: ref %s was requested for %d SUN to %s", ref, amt, acc)
			}
			pending = approved == nil
			return nil
		}
		pending = true
		return accounts.WriteAudit(ctx, tx, accountID, requester, "ledger.adjustment_requested", map[string]any{
			"amount_sun": amountSun, "ref": ref, "reason": reason, "requested_by": requester,
		})
	})
	return pending, err
}

// ApproveAdjustment credits the pending adjustment ref as approver, who must not be its
// requester (ErrSameOperator): the credit (kind adjustment, idempotent on ref), the
// approval on the pending row and the audit row "ledger.adjustment" naming both operators
// (actor the approver, details.requested_by and details.approved_by), in one transaction.
// An approved ref approved again changes nothing (Applied false).
func (l *Ledger) ApproveAdjustment(ctx context.Context, ref, approver string) (accountID string, amountSun int64, res CreditResult, err error) {
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var requester, reason string
		var approved *string
		err := tx.QueryRow(ctx, `SELECT account_id, amount_sun, reason, requested_by, approved_by FROM pending_adjustments
			WHERE ref = $1 FOR UPDATE`, ref).Scan(&accountID, &amountSun, &reason, &requester, &approved)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNoPendingAdjustment
		}
		if err != nil {
			return err
		}
		if approved != nil {
			return nil
		}
		if requester == approver {
			return ErrSameOperator
		}
		res, err = l.Credit(ctx, tx, Credit{AccountID: accountID, Kind: ledger.KindAdjustment, Ref: ref, AmountSun: amountSun,
			ReferenceID: ref, Details: map[string]any{"by": approver, "requested_by": requester, "reason": reason}})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE pending_adjustments SET approved_by = $2, approved_at = now() WHERE ref = $1`, ref, approver); err != nil {
			return err
		}
		return accounts.WriteAudit(ctx, tx, accountID, approver, "ledger.adjustment", map[string]any{
			"amount_sun": amountSun, "ref": ref, "reason": reason, "requested_by": requester, "approved_by": approver,
		})
	})
	return accountID, amountSun, res, err
}

// PendingAdjustment is an adjustment waiting for a second operator.
type PendingAdjustment struct {
	Ref, AccountID, Reason, RequestedBy string
	AmountSun                           int64
	RequestedAt                         time.Time
}

// PendingAdjustments lists the adjustments not approved yet, oldest first.
func (l *Ledger) PendingAdjustments(ctx context.Context) ([]PendingAdjustment, error) {
	rows, err := l.pool.Query(ctx, `SELECT ref, account_id, reason, requested_by, amount_sun, requested_at
		FROM pending_adjustments WHERE approved_by IS NULL ORDER BY requested_at, ref`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingAdjustment, error) {
		var p PendingAdjustment
		err := r.Scan(&p.Ref, &p.AccountID, &p.Reason, &p.RequestedBy, &p.AmountSun, &p.RequestedAt)
		return p, err
	})
}

// Status transitions support may make. The spec leaves them open; docs/ledger.md records
// these choices.
const (
	OpSuspend   = "suspend"   // unfunded or active -> suspended
	OpUnsuspend = "unsuspend" // suspended -> active (or unfunded if nothing was ever deposited)
	OpClose     = "close"     // any but closed -> closed; refused while holds are open
)

// SetAccountStatus applies a support status operation and returns the new status.
func (l *Ledger) SetAccountStatus(ctx context.Context, accountID, op, actor, reason string) (string, error) {
	var to string
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		from, err := accounts.LockStatus(ctx, tx, accountID)
		if err != nil {
			return err
		}
		switch op {
		case OpSuspend:
			if from != accounts.StatusUnfunded && from != accounts.StatusActive {
				return fmt.Errorf("ledger: cannot suspend a %s account", from)
			}
			to = accounts.StatusSuspended
		case OpUnsuspend:
			if from != accounts.StatusSuspended {
				return fmt.Errorf("ledger: cannot unsuspend a %s account", from)
			}
			var funded bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ledger_postings WHERE account_id = $1)`, accountID).Scan(&funded); err != nil {
				return err
			}
			to = accounts.StatusUnfunded
			if funded {
				to = accounts.StatusActive
			}
		case OpClose:
			if from == accounts.StatusClosed {
				return errors.New("ledger: the account is already closed")
			}
			var open int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM ledger_holds WHERE account_id = $1 AND status = 'placed'`, accountID).Scan(&open); err != nil {
				return err
			}
			if open > 0 {
				return fmt.Errorf("ledger: %d holds of in-flight orders are open; close after they settle", open)
			}
			to = accounts.StatusClosed
		default:
			return fmt.Errorf("ledger: unknown status operation %q", op)
		}
		if err := accounts.ChangeStatus(ctx, tx, accountID, to); err != nil {
			return err
		}
		return accounts.WriteAudit(ctx, tx, accountID, actor, "account."+op, map[string]any{"from": from, "to": to, "reason": reason})
	})
	return to, err
}
