package events

// BalanceCredited is the data of balance.credited (balancecredited.schema.json). Every field
// of the spec is always present; the ones that do not apply are null:
//   - reason deposit: tx_hash = txid = the transaction id, sender, block_number set;
//     confirmations and balance_sun null (Semantics 9). reference_id is the deposit id.
//   - reason refund: reference_id is the reversed order, tx_hash/txid/sender/block_number null.
//   - asset TRX: usdt_amount, rate, rate_source, spread_bps null. asset USDT: usdt_amount is a
//     decimal string, rate the SUN credited per 1 USDT after the spread, rate_source
//     fixed_env or "<swap>_v3@<block>", spread_bps the basis points taken (Semantics 10).
type BalanceCredited struct {
	Reason        string  `json:"reason"`   // deposit, refund, referral, adjustment
	Currency      string  `json:"currency"` // always TRX: the ledger's currency
	AmountSun     int64   `json:"amount_sun"`
	TxHash        *string `json:"tx_hash"`
	Confirmations *int    `json:"confirmations"`
	BalanceSun    *int64  `json:"balance_sun"`
	ReferenceID   *string `json:"reference_id"`
	Asset         string  `json:"asset"` // TRX or USDT
	USDTAmount    *string `json:"usdt_amount"`
	Rate          *int64  `json:"rate"`
	RateSource    *string `json:"rate_source"`
	SpreadBps     *int    `json:"spread_bps"`
	TxID          *string `json:"txid"`
	Sender        *string `json:"sender"`
	BlockNumber   *int64  `json:"block_number"`
}

// BalanceLow is the data of balance.low (balancelow.schema.json). balance_sun is the
// available balance (balance minus reserved) that fell below threshold_sun.
type BalanceLow struct {
	BalanceSun               int64 `json:"balance_sun"`
	ThresholdSun             int64 `json:"threshold_sun"`
	EstimatedOrdersRemaining int64 `json:"estimated_orders_remaining"`
}

// DepositAddressRotated is the data of deposit_address.rotated
// (depositaddressrotated.schema.json). RetiredAddress and RetiredCreditUntil are null on
// the first issue of an address.
type DepositAddressRotated struct {
	Address            string  `json:"address"`
	RetiredAddress     *string `json:"retired_address"`
	RetiredCreditUntil *Time   `json:"retired_credit_until"`
	RotatedAt          Time    `json:"rotated_at"`
}
