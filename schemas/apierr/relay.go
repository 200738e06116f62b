package apierr

// 2060-2069 relayed transactions (POST /v1/transactions): the checks made before anything
// is charged. Not in the spec's catalogue; added under its "new situations get new codes"
// (docs/errors.md "Codes this service adds").
var (
	TransactionUndecodable      = def(2060, "transaction_undecodable", 400, false, "The transaction is not java-tron's signed transaction JSON, or raw_data_hex is not its canonical protobuf.")
	TransactionMismatch         = def(2061, "transaction_mismatch", 400, false, "raw_data, raw_data_hex and txID of the transaction disagree.")
	TransactionSignatureInvalid = def(2062, "transaction_signature_invalid", 400, false, "The signatures do not verify for the owner under the Permission_id the transaction names.")
	TransactionNotContractCall  = def(2063, "transaction_not_contract_call", 400, false, "The transaction is not a smart-contract call (TriggerSmartContract).")
	TransactionExpiring         = def(2064, "transaction_expiring", 400, false, "The transaction expires before the service can deliver its energy and broadcast it.")
	TransactionAlreadyBroadcast = def(2065, "transaction_already_broadcast", 400, false, "The transaction is on chain or in the node's pending pool already, or was handed to the service by another account.")
	TransactionWouldRevert      = def(2066, "transaction_would_revert", 400, false, "The call reverts at the current chain state (details.node_message says why).")
	TransactionLacksBandwidth   = def(2067, "transaction_lacks_bandwidth", 400, false, "The owner has neither the bandwidth for the transaction nor the TRX to burn for it.")
)

func init() {
	Additions = append(Additions, TransactionUndecodable, TransactionMismatch, TransactionSignatureInvalid,
		TransactionNotContractCall, TransactionExpiring, TransactionAlreadyBroadcast, TransactionWouldRevert, TransactionLacksBandwidth)
}
