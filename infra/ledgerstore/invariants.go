package ledgerstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier runs read queries: a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// LiveRefs reports which of the given hold references still belong to a live operation (an
// order waiting for delivery). It reads through q, the check's own snapshot, so that an
// order confirmed while the check runs cannot look like an orphaned hold. The order
// pipeline provides it (orderstore.LiveRefs); without one a placed hold is live until its
// expires_at.
type LiveRefs func(ctx context.Context, q Querier, refs []string) (live map[string]bool, err error)

// Violation is one broken invariant.
type Violation struct {
	Rule      string // which invariant
	AccountID string // "" for a global rule
	Detail    string
}

func (v Violation) String() string {
	if v.AccountID == "" {
		return v.Rule + ": " + v.Detail
	}
	return v.Rule + " [" + v.AccountID + "]: " + v.Detail
}

// CheckOptions tune Check.
type CheckOptions struct {
	Now      time.Time // default time.Now
	LiveRefs LiveRefs  // optional, see LiveRefs
}

// Check verifies the ledger's invariants and returns every violation (none means all hold):
//
//   - balances: each account's balance_sun equals the sum of its postings (credits minus
//     debits of 'customer:<id>'), and there are no postings of accounts without a row;
//   - reserved: reserved_sun equals the sum of its placed holds;
//   - available: balance_sun - reserved_sun is never negative;
//   - totals: deposited_sun, spent_sun and refunded_sun equal the sums of their posting kinds;
//   - holds: every placed hold belongs to a live reference (LiveRefs, else not expired);
//   - deposits: every credited deposit has its posting, for the same amount and account.
//
// It reads in one REPEATABLE READ snapshot when q is a pool (see CheckPool).
func Check(ctx context.Context, q Querier, o CheckOptions) ([]Violation, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	var out []Violation
	add := func(rule, acc, format string, args ...any) {
		out = append(out, Violation{Rule: rule, AccountID: acc, Detail: fmt.Sprintf(format, args...)})
	}
	type check struct {
		sql string
		fn  func(pgx.Rows) error
	}
	checks := []check{
		{`WITH p AS (
				SELECT substr(acc, 10) AS account_id, sum(delta) AS total FROM (
					SELECT credit AS acc, amount_sun AS delta FROM ledger_postings WHERE credit LIKE 'customer:%'
					UNION ALL
					SELECT debit, -amount_sun FROM ledger_postings WHERE debit LIKE 'customer:%') x
				GROUP BY acc)
			SELECT coalesce(a.account_id, p.account_id), coalesce(a.balance_sun, 0), coalesce(p.total, 0)::bigint, a.account_id IS NULL
			FROM ledger_accounts a FULL JOIN p ON p.account_id = a.account_id
			WHERE a.account_id IS NULL OR a.balance_sun <> coalesce(p.total, 0)`,
			func(r pgx.Rows) error {
				var acc string
				var bal, sum int64
				var missing bool
				if err := r.Scan(&acc, &bal, &sum, &missing); err != nil {
					return err
				}
				if missing {
					add("balances", acc, "postings sum to %d SUN but the account has no ledger row", sum)
				} else {
					add("balances", acc, "balance_sun %d differs from the sum of postings %d", bal, sum)
				}
				return nil
			}},
		{`SELECT a.account_id, a.reserved_sun, coalesce(h.total, 0)::bigint FROM ledger_accounts a
			LEFT JOIN (SELECT account_id, sum(amount_sun) AS total FROM ledger_holds WHERE status = 'placed' GROUP BY account_id) h
			ON h.account_id = a.account_id WHERE a.reserved_sun <> coalesce(h.total, 0)`,
			func(r pgx.Rows) error {
				var acc string
				var res, sum int64
				if err := r.Scan(&acc, &res, &sum); err != nil {
					return err
				}
				add("reserved", acc, "reserved_sun %d differs from the sum of placed holds %d", res, sum)
				return nil
			}},
		{`SELECT account_id, balance_sun, reserved_sun FROM ledger_accounts WHERE balance_sun - reserved_sun < 0`,
			func(r pgx.Rows) error {
				var acc string
				var bal, res int64
				if err := r.Scan(&acc, &bal, &res); err != nil {
					return err
				}
				add("available", acc, "available is negative: balance %d, reserved %d", bal, res)
				return nil
			}},
		{`WITH k AS (SELECT account_id,
					coalesce(sum(amount_sun) FILTER (WHERE kind = 'deposit'), 0) - coalesce(sum(amount_sun) FILTER (WHERE kind = 'deposit_reversal'), 0) AS dep,
					coalesce(sum(amount_sun) FILTER (WHERE kind = 'capture'), 0) AS spent,
					coalesce(sum(amount_sun) FILTER (WHERE kind = 'refund'), 0) AS refunded
				FROM ledger_postings GROUP BY account_id)
			SELECT a.account_id, a.deposited_sun, coalesce(k.dep, 0)::bigint, a.spent_sun, coalesce(k.spent, 0)::bigint,
				a.refunded_sun, coalesce(k.refunded, 0)::bigint
			FROM ledger_accounts a LEFT JOIN k ON k.account_id = a.account_id
			WHERE a.deposited_sun <> coalesce(k.dep, 0) OR a.spent_sun <> coalesce(k.spent, 0) OR a.refunded_sun <> coalesce(k.refunded, 0)`,
			func(r pgx.Rows) error {
				var acc string
				var d1, d2, s1, s2, f1, f2 int64
				if err := r.Scan(&acc, &d1, &d2, &s1, &s2, &f1, &f2); err != nil {
					return err
				}
				add("totals", acc, "deposited %d/%d, spent %d/%d, refunded %d/%d (row/postings)", d1, d2, s1, s2, f1, f2)
				return nil
			}},
		{`SELECT d.id, d.account_id, d.credited_sun, p.amount_sun, p.account_id FROM deposits d
			LEFT JOIN ledger_postings p ON p.ref = d.posting_ref
			WHERE d.status = 'credited' AND (p.id IS NULL OR p.amount_sun <> d.credited_sun OR p.account_id <> d.account_id)`,
			func(r pgx.Rows) error {
				var id, acc string
				var want, got *int64
				var pacc *string
				if err := r.Scan(&id, &acc, &want, &got, &pacc); err != nil {
					return err
				}
				add("deposits", acc, "credited deposit %s has no matching posting (credited %v, posted %v)", id, deref(want), deref(got))
				return nil
			}},
	}
	for _, c := range checks {
		rows, err := q.Query(ctx, c.sql)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			if err := c.fn(rows); err != nil {
				rows.Close()
				return nil, err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}

	// Open holds and their references.
	rows, err := q.Query(ctx, `SELECT ref, account_id, expires_at FROM ledger_holds WHERE status = 'placed' ORDER BY ref`)
	if err != nil {
		return nil, err
	}
	type hold struct {
		ref, acc string
		exp      time.Time
	}
	var open []hold
	for rows.Next() {
		var h hold
		if err := rows.Scan(&h.ref, &h.acc, &h.exp); err != nil {
			rows.Close()
			return nil, err
		}
		open = append(open, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(open) > 0 {
		var live map[string]bool
		if o.LiveRefs != nil {
			refs := make([]string, len(open))
			for i, h := range open {
				refs[i] = h.ref
			}
			if live, err = o.LiveRefs(ctx, q, refs); err != nil {
				return nil, err
			}
		}
		for _, h := range open {
			if live != nil && !live[h.ref] {
				add("holds", h.acc, "placed hold %s belongs to no live order", h.ref)
			} else if live == nil && !h.exp.After(o.Now) {
				add("holds", h.acc, "placed hold %s expired at %s without being captured or released", h.ref, h.exp.UTC().Format(time.RFC3339))
			}
		}
	}
	return out, nil
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// CheckPool runs Check in one REPEATABLE READ, read-only snapshot, so that concurrent
// movements cannot make consistent data look broken.
func CheckPool(ctx context.Context, db interface {
	BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error)
}, o CheckOptions) ([]Violation, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(ctx)
	return Check(ctx, tx, o)
}
