package sweep

import (
	"context"
	"math/big"

	"github.com/jackc/pgx/v5"

	"rental/infra/tron"
	"rental/schemas/payments"
)

// Payment addresses (pay by transfer, docs/pricing.md) are swept to the treasury like
// deposit addresses (kind trx), but only of what no payment still needs: the amount of
// every transfer not yet settled (it may be refunded whole) and of every refund not yet
// landed stays on the address, with KeepSun for bandwidth. A transfer in a block the
// payment follower has not read yet is not counted, so an address is swept only while the
// follower's cursor is at or above the block its balance was read at.

type paymentCandidate struct {
	addr    tron.Address
	index   uint32
	owedSun int64
}

func (s *Sweeper) paymentCandidates(ctx context.Context) ([]paymentCandidate, error) {
	rows, err := s.o.Pool.Query(ctx, `
		SELECT address, min(row_key), coalesce(sum(CASE
			WHEN status IN ('seen', 'delivering') OR (status = 'delivered' AND NOT settled) THEN amount_sun
			WHEN status = 'refunding' THEN refund_sun
			ELSE 0 END), 0)::bigint
		FROM payments WHERE asset = 'TRX'
		GROUP BY address ORDER BY max(updated_at) DESC LIMIT $1`, s.o.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (paymentCandidate, error) {
		var c paymentCandidate
		var a, row string
		if err := r.Scan(&a, &row, &c.owedSun); err != nil {
			return c, err
		}
		addr, err := tron.ParseAddress(a)
		if err != nil {
			return c, err
		}
		res, tier, err := payments.ParseRowKey(row)
		if err != nil {
			return c, err
		}
		c.addr = addr
		c.index, err = payments.Index(res, tier)
		return c, err
	})
}

// followerAt is the payment follower's cursor (-1 without one).
func (s *Sweeper) followerAt(ctx context.Context) (int64, error) {
	var n int64
	err := s.o.Pool.QueryRow(ctx, `SELECT coalesce(max(block_num), -1) FROM payment_cursor`).Scan(&n)
	return n, err
}

// sweepPayments sweeps what the payment addresses hold beyond what their payments need.
func (s *Sweeper) sweepPayments(ctx context.Context, rep *Report) error {
	cands, err := s.paymentCandidates(ctx)
	if err != nil || len(cands) == 0 {
		return err
	}
	for _, c := range cands {
		open, err := s.openKinds(ctx, c.addr)
		if err != nil {
			return err
		}
		if open["trx"] {
			continue
		}
		acct, err := s.o.Node.GetAccount(ctx, c.addr)
		if err != nil {
			return err
		}
		// The balance read above is at most at this head.
		head, err := s.o.Node.GetHead(ctx)
		if err != nil {
			return err
		}
		at, err := s.followerAt(ctx)
		if err != nil {
			return err
		}
		if at < head.Number() {
			return nil // the follower may not have recorded every transfer in the balance yet
		}
		amount := acct.Balance - s.o.KeepSun - c.owedSun
		if amount < s.o.MinTRXSun {
			continue
		}
		key, err := s.o.Keys.Key(c.index)
		if err != nil {
			return err
		}
		contract := &tron.TransferContract{OwnerAddress: c.addr, ToAddress: s.o.Treasury, Amount: amount}
		tx, err := s.o.Node.CreateTransaction(ctx, contract)
		if err != nil {
			return err
		}
		if err := s.signStoreBroadcast(ctx, c.addr, "trx", big.NewInt(amount), tx, tron.Intent{Contract: contract}, key, 0, rep); err != nil {
			return err
		}
	}
	return nil
}
