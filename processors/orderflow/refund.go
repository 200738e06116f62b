package orderflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/accounts"
	"rental/infra/orderstore"
	"rental/schemas/apierr"
	"rental/schemas/orders"
)

// ErrNotRefundable is a support refund of an order that was never delivered or has
// already been reversed.
var ErrNotRefundable = errors.New("orderflow: order cannot be refunded")

// SupportRefund reverses a delivered order for one of the spec's reasons: the rest of the
// charge not yet refunded goes back to the balance (balance.credited, reason refund,
// reference_id the order), the order becomes refunded and order.refunded is sent, all in one
// transaction with an audit row. A delegation still on chain is taken back by the processor
// (as soon as its lock allows): the order is due at once. Repeating it for a refunded order
// is ErrNotRefundable (nothing twice).
func (f *Flow) SupportRefund(ctx context.Context, orderID, reason, actor string) (orderstore.Row, error) {
	if !orders.ValidRefundReason(reason) {
		return orderstore.Row{}, fmt.Errorf("orderflow: reason %q is not one of %v", reason, orders.RefundReasons)
	}
	var out orderstore.Row
	err := pgx.BeginFunc(ctx, f.o.Pool, func(tx pgx.Tx) error {
		o, err := orderstore.Lock(ctx, tx, orderID)
		if err != nil {
			return err
		}
		switch o.Status {
		case orders.Confirmed, orders.Active, orders.Expired, orders.Reclaimed:
		default:
			return fmt.Errorf("%w: it is %s", ErrNotRefundable, o.Status)
		}
		amount := o.ChargedAmountSun - o.RefundedAmountSun
		now := f.o.Now().UTC().Truncate(time.Millisecond)
		if amount > 0 {
			if err := f.o.Ledger.Refund(ctx, tx, o.AccountID, "support_refund:"+o.ID, amount, reason, o.ID); err != nil {
				return err
			}
		}
		if err := orderstore.MarkRefunded(ctx, tx, o.ID, reason, now); err != nil {
			return err
		}
		if err := accounts.WriteAudit(ctx, tx, o.AccountID, actor, "order.refund",
			map[string]any{"order_id": o.ID, "reason": reason, "amount_sun": amount}); err != nil {
			return err
		}
		o.Status, o.RefundedAmountSun = orders.Refunded, o.ChargedAmountSun
		f.transitions.WithLabelValues(string(orders.Refunded)).Inc()
		if err := f.emit(ctx, tx, o, orders.EventRefunded, o.Record.RefundedEvent(reason, now)); err != nil {
			return err
		}
		out = o
		return nil
	})
	return out, err
}

// fail ends an undelivered order: status failed with the failure, the whole charge
// reversed (captured, then refunded with balance.credited reason refund), order.failed.
func (f *Flow) fail(ctx context.Context, tx pgx.Tx, o orderstore.Row, code *apierr.Code, msg string) error {
	now := f.o.Now()
	failure := orders.Failure{Code: code.Code, Slug: code.Slug, Message: msg}
	if err := f.o.Ledger.CaptureHold(ctx, tx, o.ID, o.ChargedAmountSun); err != nil {
		return fmt.Errorf("capture before reversal: %w", err)
	}
	if o.ChargedAmountSun > 0 {
		if err := f.o.Ledger.Refund(ctx, tx, o.AccountID, "order_failed:"+o.ID, o.ChargedAmountSun, "order_failed", o.ID); err != nil {
			return fmt.Errorf("reversal: %w", err)
		}
	}
	if err := orderstore.Fail(ctx, tx, o.ID, failure, now); err != nil {
		return err
	}
	o.Status, o.Failure, o.RefundedAmountSun = orders.Failed, &failure, o.ChargedAmountSun
	f.transitions.WithLabelValues(string(orders.Failed)).Inc()
	f.log.Info("order failed", "order", o.ID, "code", code.Code, "reason", msg)
	return f.emit(ctx, tx, o, orders.EventFailed, o.Record.FailedEvent(true))
}
