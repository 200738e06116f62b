package ledgerstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"rental/schemas/ledger"
)

// Debit takes amountSun out of the account's available balance with a posting of a
// debiting kind of the transfer account (payment_kept, payment_refund; docs/pricing.md
// "Pay by transfer"). It is idempotent on (kind, ref): a repeat of the same movement
// changes nothing and reports applied false. A balance whose available part is below
// amountSun is refused with the funds error (4001/4002) and writes nothing.
func (l *Ledger) Debit(ctx context.Context, tx pgx.Tx, accountID string, kind ledger.Kind, ref string, amountSun int64,
	referenceID string, details map[string]any) (applied bool, err error) {
	if kind != ledger.KindPaymentKept && kind != ledger.KindPaymentRefund {
		return false, fmt.Errorf("ledger: %s is not a payment debit", kind)
	}
	if err := ledger.ValidateAmount(amountSun); err != nil {
		return false, err
	}
	if err := ledger.ValidateRef(ref); err != nil {
		return false, err
	}
	err = inSavepoint(ctx, tx, func(tx pgx.Tx) error {
		ok, err := insertPostingOnce(ctx, tx, posting{kind: kind, ref: string(kind) + ":" + ref, accountID: accountID,
			amount: amountSun, referenceID: referenceID, details: details})
		if err != nil || !ok {
			return err
		}
		r, err := scanRow(tx.QueryRow(ctx, `UPDATE ledger_accounts SET balance_sun = balance_sun - $2, updated_at = now()
			WHERE account_id = $1 AND balance_sun - reserved_sun >= $2 RETURNING `+rowCols, accountID, amountSun))
		if errors.Is(err, pgx.ErrNoRows) {
			var bal, res int64
			if err := tx.QueryRow(ctx, `SELECT balance_sun, reserved_sun FROM ledger_accounts WHERE account_id = $1`, accountID).Scan(&bal, &res); err != nil {
				return err
			}
			return ledger.FundsError(bal, res, amountSun)
		}
		if err != nil {
			return err
		}
		applied = true
		return l.checkLow(ctx, tx, accountID, r)
	})
	return applied, err
}
