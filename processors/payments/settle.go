package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"rental/infra/paystore"
	"rental/schemas/ledger"
	"rental/schemas/orders"
	"rental/schemas/payments"
)

// settleBatch bounds the open orders looked at by one pass.
const settleBatch = 200

// settleAll follows the orders of payments: a delegation broadcast makes the payment
// delivered; a confirmed (or later) order settles it, keeping the rest below one unit and
// refunding what the order gave back (an undelivered part); a failed order refunds the
// whole unspent amount.
func (p *Processor) settleAll(ctx context.Context) error {
	open, err := p.o.Store.OpenOrders(ctx, settleBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range open {
		if err := p.settle(ctx, o); err != nil {
			errs = append(errs, fmt.Errorf("payment %s: %w", o.TxID, err))
		}
	}
	return errors.Join(errs...)
}

func (p *Processor) settle(ctx context.Context, o paystore.Open) error {
	st := orders.Status(o.OrderStatus)
	spent := o.ChargedSun - o.RefundedSun
	switch st {
	case orders.Created, orders.Paid, orders.Allocating:
		return nil
	case orders.Delegated:
		if o.Status == payments.StoredDelivered {
			return nil
		}
		return p.delivered(ctx, o, false)
	case orders.Confirmed, orders.Active, orders.Expired, orders.Reclaimed, orders.Refunded:
		if o.Status == payments.StoredDelivering {
			if err := p.delivered(ctx, o, false); err != nil {
				return err
			}
			o.Status = payments.StoredDelivered
		}
		// What the order did not keep beyond the rest below one unit goes back (a partial
		// delivery, a support refund); the rest is kept.
		back := o.AmountSun - spent - o.KeptSun
		if back <= 0 {
			return p.delivered(ctx, o, true)
		}
		d := p.o.Rules.Refund(back, payments.ReasonDeliveryFailed)
		return p.refundOrKeep(ctx, o.Payment, o.Status, d.RefundSun, o.KeptSun+d.KeptSun, "partial_delivery")
	case orders.Failed:
		// Nothing kept: the unspent amount goes back (spent is an activation performed
		// before the delegation failed, if any).
		d := p.o.Rules.Refund(o.AmountSun-spent, payments.ReasonDeliveryFailed)
		p.log.Info("order of a payment failed; refunding", "txid", o.TxID, "order", *o.OrderID, "refund_sun", d.RefundSun)
		return p.refundOrKeep(ctx, o.Payment, o.Status, d.RefundSun, d.KeptSun, d.Reason)
	}
	return fmt.Errorf("order %s in unknown status %s", *o.OrderID, st)
}

// delivered marks the payment delivered (the delegation is broadcast) and, with settle,
// keeps its rest below one unit and closes it.
func (p *Processor) delivered(ctx context.Context, o paystore.Open, settle bool) error {
	first := false
	ok, err := p.o.Store.Act(ctx, o.TxID, o.Status, func(tx pgx.Tx, cur paystore.Payment) error {
		if cur.Status == payments.StoredDelivering {
			first = true
			if err := paystore.MarkDelivered(ctx, tx, cur.TxID); err != nil {
				return err
			}
		}
		if !settle {
			return nil
		}
		if cur.KeptSun > 0 {
			if _, err := p.o.Ledger.Debit(ctx, tx, p.o.AccountID, ledger.KindPaymentKept, cur.TxID, cur.KeptSun, cur.TxID,
				map[string]any{"reason": "rest_of_unit"}); err != nil {
				return err
			}
		}
		return paystore.Settle(ctx, tx, cur.TxID)
	})
	if err != nil || !ok {
		return err
	}
	if first {
		p.m.delivery.Observe(p.o.Now().Sub(o.BlockTime).Seconds())
		p.log.Info("payment delivered", "txid", o.TxID, "order", *o.OrderID)
	}
	if settle && o.KeptSun > 0 {
		p.m.kept.Add(float64(o.KeptSun))
	}
	return nil
}
