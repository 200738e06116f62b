package accounts

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Status changes made inside a caller's transaction (the ledger's first credit, support's
// status operations). This package is the only writer of the accounts table.

// Activate makes an unfunded account active (its first credit); activated is false when
// the account was not unfunded.
func Activate(ctx context.Context, q Querier, id string) (activated bool, err error) {
	tag, err := q.Exec(ctx, `UPDATE accounts SET status = 'active', updated_at = now() WHERE id = $1 AND status = 'unfunded'`, id)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// LockStatus locks the account's row until the transaction ends and returns its status;
// ErrNotFound when there is no such account.
func LockStatus(ctx context.Context, tx pgx.Tx, id string) (string, error) {
	var status string
	err := tx.QueryRow(ctx, `SELECT status FROM accounts WHERE id = $1 FOR UPDATE`, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return status, err
}

// ChangeStatus sets the status of an account the caller's transaction has locked
// (LockStatus).
func ChangeStatus(ctx context.Context, tx pgx.Tx, id, status string) error {
	_, err := tx.Exec(ctx, `UPDATE accounts SET status = $2, updated_at = now() WHERE id = $1`, id, status)
	return err
}
