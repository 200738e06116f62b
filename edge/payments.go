package edge

// Pay by transfer (docs/pricing.md "Pay by transfer"):
//
//	GET /v1/payments/{txid}   public (per-IP budget): a transfer to a payment address
//
// The status of a transfer anyone can look up by its transaction id: the row it paid for,
// the receiver, what it bought or why it came back, the delegation and refund
// transactions and the rental's end.

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"rental/infra/paystore"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/payments"
)

// PaymentReader reads payments; *paystore.Store is one.
type PaymentReader interface {
	Look(ctx context.Context, txid string) (paystore.View, error)
}

// Payments serves GET /v1/payments/{txid}.
type Payments struct{ store PaymentReader }

// NewPayments returns the module.
func NewPayments(store PaymentReader) (*Payments, error) {
	if store == nil {
		return nil, errors.New("edge: payments: a store is required")
	}
	return &Payments{store: store}, nil
}

// Handlers implements Module.
func (m *Payments) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{"GET /v1/payments/{txid}": m.getPayment}
}

var txidPattern = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

func (m *Payments) getPayment(ctx context.Context, rc *fasthttp.RequestCtx) error {
	txid := pathValue(rc, "txid")
	if !txidPattern.MatchString(txid) {
		return apierr.ValidationFailed.New("txid must be a transaction id: 64 hexadecimal characters").WithField("txid").
			With("constraint", "64 hex characters")
	}
	v, err := m.store.Look(ctx, strings.ToLower(txid))
	if errors.Is(err, paystore.ErrNotFound) {
		return apierr.ObjectNotFound.New("no transfer " + quote(txid) + " to a payment address").WithField("txid")
	}
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, paymentBody(v))
}

func paymentBody(v paystore.View) payments.Record {
	at := func(t *time.Time) *events.Time {
		if t == nil {
			return nil
		}
		e := events.Time(*t)
		return &e
	}
	hashes := v.DelegateHashes
	if hashes == nil {
		hashes = []string{}
	}
	return payments.Record{
		TxID: v.TxID, Network: string(v.Network), Status: payments.PublicStatus(v.Status), Row: v.RowKey, PaymentAddress: v.Address,
		Sender: v.Sender, Receiver: v.Receiver, Memo: v.Memo, Asset: v.Asset, AmountSun: v.AmountSun, BlockNumber: v.BlockNum,
		BlockTime: events.Time(v.BlockTime), OrderID: v.OrderID, Amount: v.OrderAmount, PriceSun: v.PriceSun, KeptSun: v.KeptSun,
		RefundSun: v.RefundSun, Reason: v.Reason, DelegateHashes: hashes, RefundTxID: v.RefundTxID, ExpiresAt: at(v.ExpiresAt),
		SeenAt: events.Time(v.SeenAt), DeliveredAt: at(v.DeliveredAt),
	}
}
