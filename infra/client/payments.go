package client

import (
	"context"
	"net/url"

	"rental/schemas/payments"
)

// Payment is GET /v1/payments/{txid}: a TRX transfer to a payment address of the price
// table and what became of it (docs/pricing.md "Pay by transfer").
type Payment = payments.Record

// Payment reads GET /v1/payments/{txid}; an unknown transaction id is an *Error 3022.
func (c *Client) Payment(ctx context.Context, txid string) (Payment, error) {
	var p Payment
	_, err := c.getJSON(ctx, "/v1/payments/"+url.PathEscape(txid), &p)
	return p, err
}
