package events

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"rental/schemas/network"
)

// ChainFact is one normalized fact read from a block by chainwatch and published on
// topics.ChainFacts (key = tx_id). chainfact.schema.json describes the same shape for data
// teams; keep the two in step.
//
// Contract for consumers:
//   - Facts are at least once on the wire (Kafka, relay retries) but chainwatch writes each
//     one exactly once per block it is included in. Dedupe by DedupeKey (kind, tx_id,
//     log_index); fact_id names one inclusion of that key in one block, in one rewind epoch
//     of the follower (FactIDAt): a block orphaned by a fork and brought back by a later
//     one is announced under new fact ids.
//   - After a fork, every fact of an orphaned block is cancelled by a revert fact (same key,
//     same partition, later offset) whose Reverts names the cancelled fact_id. A consumer
//     undoes what the cancelled fact did and forgets its dedupe key, because the same
//     transaction is usually included again on the new branch and then emitted again with a
//     new block_id and fact_id.
//   - Facts come from blocks at least the configured number of confirmations deep; with a
//     depth of 19 on TRON (solidified blocks) reverts do not happen in practice, but the
//     contract holds at any depth.
type ChainFact struct {
	Kind    FactKind        `json:"kind"`
	FactID  string          `json:"fact_id"`
	Network network.Network `json:"network,omitempty"`

	TxID string `json:"tx_id"`
	// LogIndex is the index of the Transfer log inside the transaction's log list
	// (trc20_transfer only; absent otherwise).
	LogIndex *int `json:"log_index,omitempty"`

	BlockNum  int64  `json:"block_num"`
	BlockID   string `json:"block_id"`
	BlockTime Time   `json:"block_time"`

	// From and To are Base58Check addresses. For tx_result From is the transaction's owner.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`

	// AmountSun is the TRX moved by a trx_transfer, in SUN.
	AmountSun int64 `json:"amount_sun,omitempty"`

	// Token is the TRC-20 contract (Base58Check) and Amount the value in the token's smallest
	// unit as a decimal string (uint256: it can exceed int64).
	Token  string `json:"token,omitempty"`
	Amount string `json:"amount,omitempty"`

	// ContractType is the transaction's contract (tx_result only), e.g.
	// "DelegateResourceContract", as java-tron names it.
	ContractType string `json:"contract_type,omitempty"`
	// Result is java-tron's contractRet (tx_result only): SUCCESS, REVERT, OUT_OF_ENERGY, ...
	Result string `json:"result,omitempty"`
	// FeeSun is the fee the block records for the transaction (tx_result only).
	FeeSun int64 `json:"fee_sun,omitempty"`

	// Reverts is the fact_id this revert cancels, and RevertedKind that fact's kind (revert
	// only). Every other field of a revert repeats the cancelled fact.
	Reverts      string   `json:"reverts,omitempty"`
	RevertedKind FactKind `json:"reverted_kind,omitempty"`
}

// FactKind is the kind of a ChainFact.
type FactKind string

const (
	// FactTRXTransfer is a successful TransferContract (TRX, in SUN).
	FactTRXTransfer FactKind = "trx_transfer"
	// FactTRC20Transfer is a Transfer log of a configured TRC-20 contract in a transaction
	// that executed successfully.
	FactTRC20Transfer FactKind = "trc20_transfer"
	// FactTxResult is the on-chain result of a tracked transaction id (any result).
	FactTxResult FactKind = "tx_result"
	// FactRevert cancels a fact of a block that a fork orphaned.
	FactRevert FactKind = "revert"
)

// FactID is the deterministic id of a fact: the same transaction (and log) read from the
// same block always gets the same id, so a re-read after a crash can never mint a second
// one; the same transaction on another branch gets another. logIndex < 0 means none.
func FactID(kind FactKind, txID string, logIndex int, blockID string) string {
	return factID(string(kind), txID, strconv.Itoa(logIndex), blockID)
}

// FactIDAt is FactID in the follower's rewind epoch (the number of forks it has rewound).
// Epoch 0 is FactID. A block orphaned by one fork and brought back by a later one gets new
// ids, so consumers that deduplicate by fact id take the returning block up again, while a
// re-read of the same block in the same epoch (a crash) still yields the same ids.
func FactIDAt(kind FactKind, txID string, logIndex int, blockID string, epoch int64) string {
	if epoch == 0 {
		return FactID(kind, txID, logIndex, blockID)
	}
	return factID(string(kind), txID, strconv.Itoa(logIndex), blockID, "epoch", strconv.FormatInt(epoch, 10))
}

// RevertFactID is the deterministic id of the revert of the fact cancelled.
func RevertFactID(cancelled string) string { return factID(string(FactRevert), cancelled) }

func factID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "cf_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// DedupeKey is the key a consumer keeps to apply a fact once: kind, tx_id and log_index
// ("-" when absent). A revert's key names the fact it cancels, so an undo is applied once.
func (f ChainFact) DedupeKey() string {
	if f.Kind == FactRevert {
		return string(FactRevert) + ":" + f.Reverts
	}
	li := "-"
	if f.LogIndex != nil {
		li = strconv.Itoa(*f.LogIndex)
	}
	return string(f.Kind) + ":" + f.TxID + ":" + li
}

// RevertOf returns the revert fact cancelling f.
func RevertOf(f ChainFact) ChainFact {
	r := f
	r.Kind = FactRevert
	r.FactID = RevertFactID(f.FactID)
	r.Reverts = f.FactID
	r.RevertedKind = f.Kind
	return r
}
