package payments

import "rental/schemas/events"

// Record is the body of GET /v1/payments/{txid}: a transfer to a payment address and what
// became of it. The edge renders it and the Go client reads it.
type Record struct {
	TxID           string       `json:"txid"`
	Network        string       `json:"network"`
	Status         string       `json:"status"` // PublicStatus: seen, delivering, delivered, refunded, failed
	Row            string       `json:"row"`
	PaymentAddress string       `json:"payment_address"`
	Sender         string       `json:"sender"`
	Receiver       string       `json:"receiver"`
	Memo           *string      `json:"memo"`
	Asset          string       `json:"asset"`
	AmountSun      int64        `json:"amount_sun"`
	BlockNumber    int64        `json:"block_number"`
	BlockTime      events.Time  `json:"block_time"`
	OrderID        *string      `json:"order_id"`
	Amount         *int64       `json:"amount"`
	PriceSun       *int64       `json:"price_sun"`
	KeptSun        int64        `json:"kept_sun"`
	RefundSun      int64        `json:"refund_sun"`
	Reason         *string      `json:"reason"`
	DelegateHashes []string     `json:"delegate_hashes"`
	RefundTxID     *string      `json:"refund_txid"`
	ExpiresAt      *events.Time `json:"expires_at"`
	SeenAt         events.Time  `json:"seen_at"`
	DeliveredAt    *events.Time `json:"delivered_at"`
}
