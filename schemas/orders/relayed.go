package orders

// RelayedTransaction is the customer's transaction an order relays (POST /v1/transactions):
// the order delivers the energy it needs, then the service broadcasts it unchanged and
// follows it to its result (docs/orders.md "Relayed transactions").
type RelayedTransaction struct {
	TxID   string   `json:"txid"`
	Status TxStatus `json:"status"`
	// Block is the number of the block holding it; null until then.
	Block *int64 `json:"block"`
	// Result is the contract result of its block ("SUCCESS", "REVERT", "OUT_OF_ENERGY",
	// ...); null until it ran.
	Result *string `json:"result"`
	// EnergyUsed is the energy it consumed (delegated and own), EnergyFeeSun the TRX its
	// owner burnt for energy beyond that (0 when the delegation covered it); null until it ran.
	EnergyUsed   *int64 `json:"energy_used"`
	EnergyFeeSun *int64 `json:"energy_fee_sun"`
}

// TxStatus is where a relayed transaction is.
type TxStatus string

const (
	TxWaiting   TxStatus = "waiting"   // the delegation is on its way; not broadcast yet
	TxBroadcast TxStatus = "broadcast" // handed to the node; waiting for its block
	TxConfirmed TxStatus = "confirmed" // ran and succeeded
	TxFailed    TxStatus = "failed"    // ran and did not succeed: the energy was delivered, the charge stands
	TxExpired   TxStatus = "expired"   // never ran: it expired outside any block; reclaimed and refunded in full
	TxRefused   TxStatus = "refused"   // never ran: the node refused it at broadcast; reclaimed and refunded in full
)

// TxStatuses lists every status, in the order a transaction passes them.
var TxStatuses = []TxStatus{TxWaiting, TxBroadcast, TxConfirmed, TxFailed, TxExpired, TxRefused}

// Ran reports a transaction that executed in a block (successfully or not).
func (s TxStatus) Ran() bool { return s == TxConfirmed || s == TxFailed }

// NeverRan reports a transaction that can no longer run: its order is refunded in full.
func (s TxStatus) NeverRan() bool { return s == TxExpired || s == TxRefused }

// RefundReasonNeverRan is the refund reason of an order whose relayed transaction never ran.
const RefundReasonNeverRan = "transaction_never_ran"
