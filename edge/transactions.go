package edge

// POST /v1/transactions (key or session, orders.write, the order rate class; docs/orders.md
// "Relayed transactions"): a signed smart-contract call the service delivers the energy
// for, then broadcasts unchanged. The checks, the estimate and the order are order
// acceptance's (infra/acceptance, Relays.Accept); this module parses and renders. The
// transaction id is the idempotency key: a repeat answers 200 with the order.

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/valyala/fasthttp"

	"rental/infra/acceptance"
)

// Transactions serves POST /v1/transactions.
type Transactions struct{ relays *acceptance.Relays }

// NewTransactions checks its dependency.
func NewTransactions(r *acceptance.Relays) (*Transactions, error) {
	if r == nil {
		return nil, errors.New("edge: transactions: Relays is required")
	}
	return &Transactions{relays: r}, nil
}

// Handlers implements Module.
func (m *Transactions) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{"POST /v1/transactions": m.post}
}

type relayBody struct {
	Transaction json.RawMessage `json:"transaction"`
	MaxPriceSun *int64          `json:"max_price_sun"`
}

func (m *Transactions) post(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := signedAccount(rc)
	if err != nil {
		return err
	}
	var b relayBody
	if err := DecodeJSON(rc, &b); err != nil {
		return err
	}
	if len(b.Transaction) == 0 || string(b.Transaction) == "null" {
		return Invalid("transaction", "required", "transaction is required: the signed transaction as TronWeb or java-tron write it")
	}
	if b.MaxPriceSun != nil && *b.MaxPriceSun < 0 {
		return Invalid("max_price_sun", "min", "max_price_sun must not be negative").With("min", 0)
	}
	res, err := m.relays.Accept(ctx, p.AccountID, acceptance.RelayRequest{Transaction: b.Transaction, MaxPriceSun: b.MaxPriceSun})
	if err != nil {
		return err
	}
	writeCreated(rc, res.Body, res.Replayed)
	return nil
}
