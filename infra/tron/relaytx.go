package tron

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// A customer's signed transaction handed to the service to relay (POST /v1/transactions):
// ParseRelayed reads and checks it offline, CheckSigners checks its signatures against the
// owner's permission read from the node. Each refusal is a *RelayError whose Reason names
// the check, so the caller can answer with the matching catalogue code.

// Reasons of a RelayError.
const (
	RelayUndecodable  = "undecodable"       // not a transaction in java-tron's JSON, or raw_data_hex not canonical protobuf
	RelayMismatch     = "mismatch"          // raw_data, raw_data_hex and txID disagree
	RelayBadSignature = "signature_invalid" // a signature that does not verify for the owner's permission
	RelayNotCall      = "not_contract_call" // not a TriggerSmartContract
)

// RelayError is a relayed transaction refused before anything was asked of the node
// (except the owner's permissions).
type RelayError struct {
	Reason string
	Msg    string
}

func (e *RelayError) Error() string { return "relayed transaction: " + e.Msg }

func relayErr(reason, format string, args ...any) *RelayError {
	return &RelayError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// MaxRelaySignatures bounds the signatures read: java-tron's default totalSignNum is 5
// (DynamicPropertiesStore TOTAL_SIGN_NUM), and a permission holds at most 5 keys.
const MaxRelaySignatures = 5

// Relayed is a decoded, self-consistent, signed smart-contract call.
type Relayed struct {
	Tx      *Transaction // as sent (broadcast unchanged)
	Raw     *RawData
	RawHex  []byte // raw_data bytes
	Call    *TriggerSmartContract
	Signers []Address // one per signature, in order (recovered over the txID)
}

// Owner is the account that signs and pays.
func (r *Relayed) Owner() Address { return r.Call.OwnerAddress }

// Size is the bytes java-tron charges as bandwidth for the transaction: the protobuf
// Transaction (raw_data and signatures) plus 64 for the result it stores
// (BandwidthProcessor.consume: trx.getSerializedSize() + MAX_RESULT_SIZE_IN_TX).
func (r *Relayed) Size() int64 {
	n := fieldLen(len(r.RawHex))
	for range r.Signers {
		n += fieldLen(65)
	}
	return int64(n) + 64
}

func fieldLen(l int) int {
	n := 1 + l // tag
	for v := uint64(l); ; v >>= 7 {
		n++
		if v < 0x80 {
			break
		}
	}
	return n
}

// relayedJSON is the transaction as TronWeb and java-tron write it.
type relayedJSON struct {
	Visible    *bool           `json:"visible"`
	TxID       *string         `json:"txID"`
	RawData    json.RawMessage `json:"raw_data"`
	RawDataHex *string         `json:"raw_data_hex"`
	Signature  []string        `json:"signature"`
	Ret        json.RawMessage `json:"ret"`
}

// ParseRelayed reads a signed transaction from outside: it must be a JSON object with
// txID, raw_data, raw_data_hex and at least one signature; raw_data_hex must be the
// canonical protobuf of raw_data (what the node re-packs at broadcast, Util.packTransaction)
// and hash to txID; the contract must be a TriggerSmartContract; every signature must be
// 65 bytes and recover an address over the txID. Whether the signers may sign for the owner
// is CheckSigners' question.
func ParseRelayed(b []byte) (*Relayed, error) {
	var j relayedJSON
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&j); err != nil {
		return nil, relayErr(RelayUndecodable, "not a transaction object: %v", err)
	}
	if d.More() {
		return nil, relayErr(RelayUndecodable, "data after the transaction object")
	}
	switch {
	case j.TxID == nil:
		return nil, relayErr(RelayUndecodable, "txID is missing")
	case j.RawDataHex == nil:
		return nil, relayErr(RelayUndecodable, "raw_data_hex is missing")
	case len(j.RawData) == 0 || string(j.RawData) == "null":
		return nil, relayErr(RelayUndecodable, "raw_data is missing")
	case len(j.Signature) == 0:
		return nil, relayErr(RelayBadSignature, "the transaction is not signed")
	case len(j.Signature) > MaxRelaySignatures:
		return nil, relayErr(RelayBadSignature, "%d signatures, at most %d", len(j.Signature), MaxRelaySignatures)
	case len(j.Ret) > 0 && string(j.Ret) != "null" && string(j.Ret) != "[]":
		return nil, relayErr(RelayUndecodable, "the transaction carries a result (ret): it was executed already")
	}
	raw, err := hex.DecodeString(*j.RawDataHex)
	if err != nil || len(raw) == 0 {
		return nil, relayErr(RelayUndecodable, "raw_data_hex is not hex")
	}
	r, err := UnmarshalRawData(raw)
	if err != nil {
		return nil, relayErr(RelayUndecodable, "raw_data_hex: %v", err)
	}
	id := TxID(raw)
	if !strings.EqualFold(id, *j.TxID) {
		return nil, relayErr(RelayMismatch, "txID %.80s is not sha256(raw_data_hex) %s", *j.TxID, id)
	}
	fromJSON, err := ParseRawDataJSON(j.RawData)
	if err != nil {
		return nil, relayErr(RelayUndecodable, "raw_data: %v", err)
	}
	again, err := fromJSON.Marshal()
	if err != nil || !bytes.Equal(again, raw) {
		return nil, relayErr(RelayMismatch, "raw_data and raw_data_hex differ")
	}
	call, ok := r.Contract.(*TriggerSmartContract)
	if !ok {
		return nil, relayErr(RelayNotCall, "the contract is %s; only TriggerSmartContract calls are relayed", r.Contract.Type())
	}
	h := sha256.Sum256(raw)
	signers := make([]Address, 0, len(j.Signature))
	for i, s := range j.Signature {
		sig, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
		if err != nil {
			return nil, relayErr(RelayBadSignature, "signature %d is not hex", i)
		}
		a, err := RecoverHash(h[:], sig)
		if err != nil {
			return nil, relayErr(RelayBadSignature, "signature %d: %v", i, err)
		}
		signers = append(signers, a)
	}
	visible := j.Visible != nil && *j.Visible
	tx := &Transaction{Visible: visible, TxID: strings.ToLower(id), RawData: j.RawData, RawDataHex: strings.ToLower(*j.RawDataHex), Signature: j.Signature}
	return &Relayed{Tx: tx, Raw: r, RawHex: raw, Call: call, Signers: signers}, nil
}

// SigningKey is one key of a permission (getaccount's keys[]).
type SigningKey struct {
	Address string `json:"address"`
	Weight  int64  `json:"weight"`
}

// SigningPermission is protocol.Permission as getaccount prints it.
type SigningPermission struct {
	Type       string       `json:"type,omitempty"` // "Owner" (absent), "Witness", "Active"
	ID         int32        `json:"id,omitempty"`
	Name       string       `json:"permission_name,omitempty"`
	Threshold  int64        `json:"threshold"`
	Operations string       `json:"operations,omitempty"` // 32 bytes hex: one bit per contract type
	Keys       []SigningKey `json:"keys"`
}

// AccountPermissions are the permissions getaccount prints for an account.
type AccountPermissions struct {
	Address string              `json:"address,omitempty"`
	Balance int64               `json:"balance,omitempty"` // SUN
	Owner   *SigningPermission  `json:"owner_permission,omitempty"`
	Witness *SigningPermission  `json:"witness_permission,omitempty"`
	Active  []SigningPermission `json:"active_permission,omitempty"`
}

// Exists reports whether the node knows the account.
func (a *AccountPermissions) Exists() bool { return a.Address != "" }

// permissionByID mirrors AccountCapsule.getPermissionById, and for an account the node does
// not know TransactionCapsule.validateSignature's defaults (owner: the address alone;
// id 2: the default active permission, which allows a smart-contract call).
func (a *AccountPermissions) permissionByID(owner Address, id int32) *SigningPermission {
	def := &SigningPermission{Threshold: 1, Keys: []SigningKey{{Address: owner.String(), Weight: 1}}}
	if !a.Exists() {
		switch id {
		case 0:
			return def
		case 2:
			d := *def
			d.Type, d.ID, d.Operations = "Active", 2, allOperations
			return &d
		}
		return nil
	}
	switch id {
	case 0:
		if a.Owner != nil {
			return a.Owner
		}
		return def
	case 1:
		return a.Witness
	}
	for i := range a.Active {
		if a.Active[i].ID == id {
			return &a.Active[i]
		}
	}
	return nil
}

// allOperations permits every contract type (a default active permission's operations
// cover every type the chain accepts; only the TriggerSmartContract bit matters here).
var allOperations = strings.Repeat("ff", 32)

// CheckSigners verifies the signatures of r for its owner under the Permission_id it names,
// as java-tron does at broadcast (TransactionCapsule.validateSignature, checkPermission and
// checkWeight): the permission must exist; a non-owner permission must be Active and allow
// the contract's type in its operations; at most as many signatures as keys; every signer
// a key of the permission, none twice; the weights reach the threshold.
func CheckSigners(r *Relayed, perms *AccountPermissions) error {
	id := r.Raw.PermissionID
	p := perms.permissionByID(r.Owner(), id)
	if p == nil {
		return relayErr(RelayBadSignature, "the owner has no permission %d", id)
	}
	if id != 0 {
		if p.Type != "Active" {
			return relayErr(RelayBadSignature, "permission %d is not an active permission", id)
		}
		ops, err := hex.DecodeString(p.Operations)
		if err != nil || len(ops) != 32 {
			return relayErr(RelayBadSignature, "permission %d has no readable operations", id)
		}
		t := int(r.Raw.Contract.Type())
		if ops[t/8]&(1<<(t%8)) == 0 {
			return relayErr(RelayBadSignature, "permission %d does not allow %s", id, r.Raw.Contract.Type())
		}
	}
	if len(r.Signers) > len(p.Keys) {
		return relayErr(RelayBadSignature, "%d signatures for a permission of %d keys", len(r.Signers), len(p.Keys))
	}
	weights := make(map[Address]int64, len(p.Keys))
	for _, k := range p.Keys {
		a, err := ParseAnyAddress(k.Address)
		if err != nil {
			return relayErr(RelayBadSignature, "permission %d lists an unreadable key", id)
		}
		weights[a] = k.Weight
	}
	seen := make(map[Address]bool, len(r.Signers))
	var total int64
	for _, s := range r.Signers {
		w := weights[s]
		if w <= 0 {
			return relayErr(RelayBadSignature, "signed by %s, which is not a key of permission %d of %s", s, id, r.Owner())
		}
		if seen[s] {
			return relayErr(RelayBadSignature, "%s signed twice", s)
		}
		seen[s] = true
		total += w
	}
	if total < p.Threshold {
		return relayErr(RelayBadSignature, "signature weight %d is below the threshold %d of permission %d", total, p.Threshold, id)
	}
	return nil
}

// ErrRelayReason is the Reason of err when it is a *RelayError, else "".
func ErrRelayReason(err error) string {
	var re *RelayError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}
