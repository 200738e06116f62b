package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	return c.create(ctx, "/v1/transactions", body, string(bytes.ToLower(m[1])))
}
