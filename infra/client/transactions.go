package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
)

// RelayRequest is the body of POST /v1/transactions: the signed transaction as TronWeb or
// java-tron write it (txID, raw_data, raw_data_hex, signature) and an optional price cap.
type RelayRequest struct {
	Transaction json.RawMessage `json:"transaction"`
	MaxPriceSun *int64          `json:"max_price_sun,omitempty"`
}

var txIDPattern = regexp.MustCompile(`"txID"\s*:\s*"([0-9a-fA-F]{64})"`)

// RelayTransaction asks the service to deliver the energy of one signed smart-contract call
// and broadcast it (docs/orders.md "Relayed transactions"). The transaction id is the
// idempotency key, so the call is retried as CreateOrder is; when it gives no definite
// answer the order is looked up by the transaction id (its client_order_id). The order's
// transaction field follows the call to its result (GET /v1/orders/{id}).
func (c *Client) RelayTransaction(ctx context.Context, r RelayRequest) (Created, error) {
	m := txIDPattern.FindSubmatch(r.Transaction)
	if m == nil {
		return Created{}, errors.New("client: RelayTransaction needs a transaction with its txID")
	}
	body, err := json.Marshal(r)
	if err != nil {
		return Created{}, err
	}
	resp, err := c.Do(ctx, http.MethodPost, "/v1/transactions", body, Idempotent())
	out := Created{Response: resp}
	if err == nil {
		out.Replayed = resp.Status == http.StatusOK
		return out, decodeInto(resp, &out.Order)
	}
	var gave *GiveUpError
	var te *TransportError
	if !errors.As(err, &gave) && (!errors.As(err, &te) || ctx.Err() != nil) {
		return out, err // a definite answer, or the caller's context ended
	}
	o, found, lerr := c.OrderByClientID(ctx, string(bytes.ToLower(m[1])))
	switch {
	case lerr != nil:
		return out, errors.Join(ErrOutcomeUnknown, err, lerr)
	case !found:
		return out, err
	}
	out.Order, out.LookedUp, out.Replayed = o, true, true
	return out, nil
}
