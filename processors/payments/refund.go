package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/orderstore"
	"rental/infra/paystore"
	"rental/infra/tron"
	"rental/schemas/ledger"
	"rental/schemas/orders"
	"rental/schemas/payments"
)

// rebroadcastEvery is how often a stored refund still pending is broadcast again.
const rebroadcastEvery = 3 * time.Second

// broadcast sends a signed refund; a refusal is logged and the refund pass sends it again
// (the same bytes, so the same transaction id) until it lands or expires.
func (p *Processor) broadcast(ctx context.Context, tx *tron.Transaction) {
	p.sent[tx.TxID] = p.o.Now()
	if _, err := p.o.Node.BroadcastTransaction(ctx, tx); err != nil && !isDup(err) {
		p.log.Warn("refund broadcast refused; sent again later", "refund_txid", tx.TxID, "err", err)
	}
}

func isDup(err error) bool {
	var ne *tron.NodeError
	return errors.As(err, &ne) && ne.Code == tron.CodeDupTransaction
}

// refundAll confirms the stored refunds that landed, broadcasts again those still pending,
// and replaces one that expired without landing by a fresh transaction of the same amount
// (the expired one can never land, so the sender is paid once).
func (p *Processor) refundAll(ctx context.Context) error {
	pending, err := p.o.Store.Refunding(ctx, settleBatch)
	if err != nil || len(pending) == 0 {
		return err
	}
	// A transaction's expiration is judged by the chain's time (the head block's), as
	// java-tron does, not by this machine's clock.
	head, err := p.o.Node.GetHead(ctx)
	if err != nil {
		return err
	}
	headTime := time.UnixMilli(head.Timestamp())
	var errs []error
	for _, r := range pending {
		info, err := p.o.Node.GetTransactionInfoByID(ctx, r.RefundTxID)
		if err != nil && !errors.Is(err, tron.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		if err == nil && info.ID != "" {
			delete(p.sent, r.RefundTxID)
			if err := p.o.Store.RefundLanded(ctx, r.TxID, r.RefundTxID); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		now := p.o.Now()
		if headTime.After(r.Expires) {
			if err := p.replaceRefund(ctx, r); err != nil {
				errs = append(errs, fmt.Errorf("payment %s: %w", r.TxID, err))
			}
			continue
		}
		if now.Sub(p.sent[r.RefundTxID]) >= rebroadcastEvery {
			var tx tron.Transaction
			if err := json.Unmarshal(r.Signed, &tx); err != nil {
				errs = append(errs, err)
				continue
			}
			p.broadcast(ctx, &tx)
		}
	}
	return errors.Join(errs...)
}

func (p *Processor) replaceRefund(ctx context.Context, r paystore.Pending) error {
	// The node must not hold the old one: ask once more by id before signing anew.
	tx, err := p.o.Node.GetTransactionByID(ctx, r.RefundTxID)
	if err != nil && !errors.Is(err, tron.ErrNotFound) {
		return err
	}
	if err == nil && tx != nil && tx.TxID != "" {
		return nil // in a block after all: the next pass sees it landed
	}
	s, err := p.signRefund(ctx, r.Address, r.Sender, r.RefundSun)
	if err != nil {
		return err
	}
	_, err = p.o.Store.Act(ctx, r.TxID, payments.StoredRefunding, func(tx pgx.Tx, _ paystore.Payment) error {
		return paystore.ReplaceRefund(ctx, tx, r.TxID, r.RefundTxID, s.txid, s.body, s.expires)
	})
	if err != nil {
		return err
	}
	delete(p.sent, r.RefundTxID)
	p.log.Warn("refund expired without landing; signed again", "txid", r.TxID, "old", r.RefundTxID, "new", s.txid)
	p.broadcast(ctx, s.tx)
	return nil
}

// orphansAll handles payments acted on whose transfer a fork removed. While the transfer
// can still be included again (its expiration is ahead of the head's time) nothing is
// done: a fork usually re-includes it. Once it cannot, the transfer never happened: the
// order is reclaimed at once (its delegation taken back where the lock allows), a refund
// not yet landed is voided, and what was delivered is the loss, counted in
// rental_payments_fork_loss_sun_total and booked to equity (an adjustment) so the transfer
// account still balances.
func (p *Processor) orphansAll(ctx context.Context) error {
	orphans, err := p.o.Store.Orphaned(ctx, settleBatch)
	if err != nil || len(orphans) == 0 {
		return err
	}
	head, err := p.o.Node.GetHead(ctx)
	if err != nil {
		return err
	}
	headTime := time.UnixMilli(head.Timestamp())
	var errs []error
	for _, o := range orphans {
		if !headTime.After(o.TxExpires) {
			continue
		}
		if err := p.reverse(ctx, o); err != nil {
			errs = append(errs, fmt.Errorf("payment %s: %w", o.TxID, err))
		}
	}
	return errors.Join(errs...)
}

// errNotYet rolls back a reversal to try at a later pass.
var errNotYet = errors.New("payments: not yet")

func (p *Processor) reverse(ctx context.Context, o paystore.Payment) error {
	var loss int64
	ok, err := p.o.Store.Act(ctx, o.TxID, o.Status, func(tx pgx.Tx, cur paystore.Payment) error {
		if cur.OrphanedAt == nil {
			return nil // included again meanwhile
		}
		if cur.OrderID != nil {
			row, err := orderstore.Lock(ctx, tx, *cur.OrderID)
			if err != nil {
				return err
			}
			switch {
			case row.Status.Terminal():
			case row.Status != orders.Confirmed && row.Status != orders.Active:
				return errNotYet // a delegation still landing is reclaimed once confirmed
			case row.FilledBy == nil || *row.FilledBy == orders.FilledByPool:
				// The own pools' delegation is taken back by the order processor as for
				// POST /v1/orders/{id}/reclaim; a provider's fill cannot be.
				_, fresh, err := orderstore.RequestReclaim(ctx, tx, row.ID, p.o.Now())
				if err != nil {
					return err
				}
				if fresh {
					if err := orderstore.Enqueue(ctx, tx, row.ID, orderstore.IntentReclaim); err != nil {
						return err
					}
				}
			}
			loss = row.ChargedAmountSun - row.RefundedAmountSun
		}
		if cur.Status == payments.StoredRefunding || cur.Status == payments.StoredRefunded {
			loss += cur.RefundSun // a refund of money that never came
		}
		return p.reverseLedger(ctx, tx, cur, loss)
	})
	if errors.Is(err, errNotYet) {
		return nil
	}
	if err != nil || !ok {
		return err
	}
	p.m.outcomes.WithLabelValues("fork_reclaimed").Inc()
	p.m.forkLoss.Add(float64(loss))
	p.log.Warn("a fork removed a transfer after it was acted on; order reclaimed", "txid", o.TxID, "order", o.OrderID, "loss_sun", loss)
	return nil
}

// reverseLedger takes the removed transfer's money back out of the transfer account: the
// part still there (what was neither spent on the order nor refunded nor kept) as a
// payment_refund to nobody, and the part the order spent as the loss.
func (p *Processor) reverseLedger(ctx context.Context, tx pgx.Tx, cur paystore.Payment, loss int64) error {
	if cur.Status == payments.StoredHeld {
		return paystore.Reverted(ctx, tx, cur.TxID, payments.ReasonReclaimedByFork) // a token: never in the ledger
	}
	details := map[string]any{"reason": payments.ReasonReclaimedByFork}
	// A refund stands (its transaction is signed and may land): it is part of the loss.
	left := cur.AmountSun - loss - cur.KeptSun
	if cur.Status != payments.StoredRefunding && cur.Status != payments.StoredRefunded {
		left -= cur.RefundSun
	}
	if left > 0 {
		if _, err := p.o.Ledger.Debit(ctx, tx, p.o.AccountID, ledger.KindPaymentRefund, "fork:"+cur.TxID, left, cur.TxID, details); err != nil {
			return err
		}
	}
	return paystore.Reverted(ctx, tx, cur.TxID, payments.ReasonReclaimedByFork)
}
