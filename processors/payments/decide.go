package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/acceptance"
	"rental/infra/ledgerstore"
	"rental/infra/paystore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/ledger"
	"rental/schemas/payments"
)

// decideBatch bounds the payments decided by one pass.
const decideBatch = 100

// errRetry leaves a payment seen for the next pass (no snapshot, the node's answer on the
// receiver unknown, a lock conflict): nothing was written.
var errRetry = errors.New("payments: retry later")

func (p *Processor) decideAll(ctx context.Context) error {
	seen, err := p.o.Store.Seen(ctx, decideBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, pay := range seen {
		if err := p.decide(ctx, pay); err != nil && !errors.Is(err, errRetry) {
			errs = append(errs, fmt.Errorf("payment %s: %w", pay.TxID, err))
		}
	}
	return errors.Join(errs...)
}

// decide prices one payment and places its order, or refunds or keeps it.
func (p *Processor) decide(ctx context.Context, pay paystore.Payment) error {
	snap, err := p.o.Prices.Snapshot()
	if err != nil {
		return errRetry
	}
	res, tier, err := payments.ParseRowKey(pay.RowKey)
	if err != nil {
		return err
	}
	receiver, err := tron.ParseAddress(pay.Receiver)
	if err != nil {
		return err
	}
	act := p.o.Prices.Activated(ctx, receiver)
	if !act.Known {
		return errRetry
	}
	d := p.o.Rules.Decide(snap, res, tier, pay.AmountSun, !act.Activated)
	if d.Order {
		refusal, err := p.placeOrder(ctx, pay, d)
		if err != nil || refusal == "" {
			return err
		}
		d = p.o.Rules.Refund(pay.AmountSun, refusal)
	}
	return p.refundOrKeep(ctx, pay, payments.StoredSeen, d.RefundSun, d.KeptSun, d.Reason)
}

// placeOrder credits the transfer and places its order in one transaction. A refusal of
// acceptance that no retry changes is returned as a refund reason (nothing committed).
func (p *Processor) placeOrder(ctx context.Context, pay paystore.Payment, d payments.Decision) (refusal string, err error) {
	res, tier, _ := payments.ParseRowKey(pay.RowKey)
	receiver, _ := tron.ParseAddress(pay.Receiver)
	var placeErr error
	ok, err := p.o.Store.Act(ctx, pay.TxID, payments.StoredSeen, func(tx pgx.Tx, cur paystore.Payment) error {
		if err := p.received(ctx, tx, cur); err != nil {
			return err
		}
		maxPrice := d.PriceSun
		rec, err := p.o.Placer.PlaceTx(ctx, tx, p.o.AccountID, acceptance.Placement{ClientOrderID: cur.TxID, Resource: res,
			Amount: d.Amount, Tier: tier, Receiver: receiver, Activate: true, MaxPriceSun: &maxPrice})
		if err != nil {
			placeErr = err
			return err
		}
		return paystore.SetDelivering(ctx, tx, cur.TxID, rec.ID, rec.Amount, rec.TotalAmountSun, cur.AmountSun-rec.TotalAmountSun)
	})
	if placeErr != nil {
		if reason := refusalReason(placeErr); reason != "" {
			p.log.Info("payment refused by acceptance; refunding", "txid", pay.TxID, "reason", reason, "err", placeErr)
			return reason, nil
		}
		return "", errRetry
	}
	if err != nil {
		return "", err
	}
	if ok {
		p.m.outcomes.WithLabelValues("order").Inc()
		p.log.Info("payment ordered", "txid", pay.TxID, "row", pay.RowKey, "amount", d.Amount, "price_sun", d.PriceSun, "receiver", pay.Receiver)
	}
	return "", nil
}

// refusalReason maps an acceptance refusal to the refund reason, or "" when a later try
// may succeed (node or database trouble, a price that moved, a lock conflict).
func refusalReason(err error) string {
	e := apierr.As(err)
	switch e.Code {
	case apierr.InsufficientSupply, apierr.ProviderUnavailable, apierr.CapacityUnavailable:
		return payments.ReasonSupplyShort
	case apierr.TierUnavailable, apierr.SupplyPaused, apierr.AmountOutOfRange:
		return payments.ReasonRowUnavailable
	case apierr.ValidationFailed, apierr.ReceiverIsOurs, apierr.ReceiverCapacityExceeded:
		return payments.ReasonReceiver
	}
	return ""
}

// received credits the transfer to the transfer account: the ledger's record of money in.
func (p *Processor) received(ctx context.Context, tx pgx.Tx, pay paystore.Payment) error {
	_, err := p.o.Ledger.Credit(ctx, tx, ledgerstore.Credit{AccountID: p.o.AccountID, Kind: ledger.KindDeposit, Ref: "payment:" + pay.TxID,
		AmountSun: pay.AmountSun, ReferenceID: pay.TxID, Quiet: true,
		Details: map[string]any{"payment_address": pay.Address, "row": pay.RowKey, "sender": pay.Sender, "block_num": pay.BlockNum}})
	return err
}

// refundOrKeep closes a payment in status want: credits the transfer (when it was not
// credited yet), keeps keptSun (payment_kept; the payment's kept_sun becomes keptSun) and
// refunds refundSun (payment_refund) with a signed refund stored in the same transaction
// and broadcast after the commit.
func (p *Processor) refundOrKeep(ctx context.Context, pay paystore.Payment, want string, refundSun, keptSun int64, reason string) error {
	var signed *signedRefund
	if refundSun > 0 {
		var err error
		if signed, err = p.signRefund(ctx, pay.Address, pay.Sender, refundSun); err != nil {
			return err
		}
	}
	ok, err := p.o.Store.Act(ctx, pay.TxID, want, func(tx pgx.Tx, cur paystore.Payment) error {
		if want == payments.StoredSeen {
			if err := p.received(ctx, tx, cur); err != nil {
				return err
			}
		}
		if keptSun > 0 {
			if _, err := p.o.Ledger.Debit(ctx, tx, p.o.AccountID, ledger.KindPaymentKept, cur.TxID, keptSun, cur.TxID,
				map[string]any{"reason": reason}); err != nil {
				return err
			}
		}
		if signed == nil {
			return paystore.SetKept(ctx, tx, cur.TxID, payments.StoredKept, keptSun, reason)
		}
		if _, err := p.o.Ledger.Debit(ctx, tx, p.o.AccountID, ledger.KindPaymentRefund, cur.TxID, refundSun, cur.TxID,
			map[string]any{"reason": reason, "refund_txid": signed.txid}); err != nil {
			return err
		}
		return paystore.SetRefunding(ctx, tx, cur.TxID, paystore.Refund{AmountSun: refundSun, KeptSun: keptSun,
			Reason: reason, TxID: signed.txid, Signed: signed.body, Expires: signed.expires})
	})
	if err != nil || !ok {
		return err
	}
	p.m.kept.Add(float64(keptSun))
	if signed == nil {
		p.m.outcomes.WithLabelValues("kept").Inc()
		p.log.Info("payment kept", "txid", pay.TxID, "kept_sun", keptSun, "reason", reason)
		return nil
	}
	p.m.outcomes.WithLabelValues("refund").Inc()
	p.m.refunded.Add(float64(refundSun))
	p.log.Info("payment refunded", "txid", pay.TxID, "refund_sun", refundSun, "refund_txid", signed.txid, "reason", reason)
	p.broadcast(ctx, signed.tx)
	return nil
}

type signedRefund struct {
	tx      *tron.Transaction
	txid    string
	body    []byte
	expires time.Time
}

// signRefund has the node build the TRX transfer from the payment address to the sender,
// checks it against the intent and signs it with the payment address's key.
func (p *Processor) signRefund(ctx context.Context, from, to string, sun int64) (*signedRefund, error) {
	fa, err := tron.ParseAddress(from)
	if err != nil {
		return nil, err
	}
	ta, err := tron.ParseAddress(to)
	if err != nil {
		return nil, err
	}
	addr, ok := p.o.Addresses[fa]
	if !ok {
		return nil, fmt.Errorf("payments: no key for payment address %s", from)
	}
	c := &tron.TransferContract{OwnerAddress: fa, ToAddress: ta, Amount: sun}
	tx, err := p.o.Node.CreateTransaction(ctx, c)
	if err != nil {
		return nil, err
	}
	// The node sets the expiration from its head block's time (java-tron's
	// TransactionCapsule: head time + 60 s), which is the clock it is checked against.
	head, err := p.o.Node.GetHead(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := tron.CheckBuilt(tx, tron.Intent{Contract: c, Now: time.UnixMilli(head.Timestamp())})
	if err != nil {
		return nil, err
	}
	if err := tron.SignTransaction(tx, addr.Key); err != nil {
		return nil, err
	}
	body, err := json.Marshal(tx)
	if err != nil {
		return nil, err
	}
	return &signedRefund{tx: tx, txid: tx.TxID, body: body, expires: time.UnixMilli(raw.Expiration).UTC()}, nil
}
