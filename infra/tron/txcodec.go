package tron

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// RawData is protocol.Transaction.raw with exactly one typed contract (java-tron accepts
// only one). Field numbers from core/Tron.proto: ref_block_bytes=1, ref_block_num=3,
// ref_block_hash=4, expiration=8, auths=9, data=10, contract=11, scripts=12,
// timestamp=14, fee_limit=18; Contract: type=1, parameter=2 (google.protobuf.Any
// {type_url=1, value=2}), provider=3, ContractName=4, Permission_id=5.
//
// auths, scripts, provider and ContractName are unused on the network and not supported:
// decoding rejects them, so nothing the codec cannot show is ever signed.
type RawData struct {
	RefBlockBytes []byte // bytes 6..8 of the reference block number (2 bytes)
	RefBlockNum   int64
	RefBlockHash  []byte // bytes 8..16 of the reference block id (8 bytes)
	Expiration    int64  // milliseconds since the epoch
	Data          []byte // memo
	Contract      Contract
	PermissionID  int32
	Timestamp     int64 // milliseconds since the epoch
	FeeLimit      int64 // SUN; smart-contract calls only
}

// ErrTxMismatch is wrapped when a transaction is inconsistent with itself (txID, JSON and
// hex disagree) or with what the caller intended. The caller must not sign or broadcast it.
var ErrTxMismatch = errors.New("transaction mismatch")

// ErrTxDecode is wrapped when transaction bytes or JSON cannot be read.
var ErrTxDecode = errors.New("transaction decode")

// Marshal encodes r as java-tron does.
func (r *RawData) Marshal() ([]byte, error) {
	if r.Contract == nil {
		return nil, errors.New("raw data: no contract")
	}
	b := make([]byte, 0, 256)
	b = appendBytes(b, 1, r.RefBlockBytes)
	b = appendVarint(b, 3, uint64(r.RefBlockNum))
	b = appendBytes(b, 4, r.RefBlockHash)
	b = appendVarint(b, 8, uint64(r.Expiration))
	b = appendBytes(b, 10, r.Data)

	var anyMsg []byte
	anyMsg = protowire.AppendTag(anyMsg, 1, protowire.BytesType)
	anyMsg = protowire.AppendString(anyMsg, r.Contract.Type().TypeURL())
	anyMsg = appendBytes(anyMsg, 2, r.Contract.appendProto(nil))
	var c []byte
	c = appendVarint(c, 1, uint64(r.Contract.Type()))
	c = protowire.AppendTag(c, 2, protowire.BytesType)
	c = protowire.AppendBytes(c, anyMsg)
	c = appendVarint(c, 5, uint64(int64(r.PermissionID)))
	b = protowire.AppendTag(b, 11, protowire.BytesType)
	b = protowire.AppendBytes(b, c)

	b = appendVarint(b, 14, uint64(r.Timestamp))
	b = appendVarint(b, 18, uint64(r.FeeLimit))
	return b, nil
}

// UnmarshalRawData decodes raw_data bytes. It accepts only the canonical encoding of the
// supported contracts (what Marshal would produce), so decoding and re-encoding are exact
// inverses and a check on the decoded value is a check on the signed bytes.
func UnmarshalRawData(b []byte) (*RawData, error) {
	r := &RawData{}
	contracts := 0
	err := walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.copyBytes(&r.RefBlockBytes)
		case 3:
			return f.int64(&r.RefBlockNum)
		case 4:
			return f.copyBytes(&r.RefBlockHash)
		case 8:
			return f.int64(&r.Expiration)
		case 10:
			return f.copyBytes(&r.Data)
		case 11:
			if err := f.want(protowire.BytesType); err != nil {
				return err
			}
			contracts++
			return r.unmarshalContract(f.bytes)
		case 14:
			return f.int64(&r.Timestamp)
		case 18:
			return f.int64(&r.FeeLimit)
		}
		return unknownField("Transaction.raw", f)
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTxDecode, err)
	}
	if contracts != 1 {
		return nil, fmt.Errorf("%w: %d contracts, want 1", ErrTxDecode, contracts)
	}
	again, err := r.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTxDecode, err)
	}
	if !bytes.Equal(again, b) {
		return nil, fmt.Errorf("%w: raw data is not in canonical encoding", ErrTxDecode)
	}
	return r, nil
}

func (r *RawData) unmarshalContract(b []byte) error {
	var (
		typ     ContractType
		typeURL string
		value   []byte
		hasAny  bool
	)
	err := walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.int32((*int32)(&typ))
		case 2:
			if err := f.want(protowire.BytesType); err != nil {
				return err
			}
			hasAny = true
			return walkFields(f.bytes, func(g field) error {
				switch g.num {
				case 1:
					if err := g.want(protowire.BytesType); err != nil {
						return err
					}
					typeURL = string(g.bytes)
					return nil
				case 2:
					return g.copyBytes(&value)
				}
				return unknownField("google.protobuf.Any", g)
			})
		case 5:
			return f.int32(&r.PermissionID)
		}
		return unknownField("Transaction.Contract", f)
	})
	if err != nil {
		return err
	}
	c := newContract(typ)
	if c == nil {
		return fmt.Errorf("unsupported contract type %s", typ)
	}
	if !hasAny || typeURL != typ.TypeURL() {
		return fmt.Errorf("contract %s has type_url %q", typ, typeURL)
	}
	if err := c.unmarshalProto(value); err != nil {
		return err
	}
	r.Contract = c
	return nil
}

// rawDataJSON is java-tron's raw_data object.
type rawDataJSON struct {
	Contract      []contractJSON `json:"contract"`
	RefBlockBytes string         `json:"ref_block_bytes,omitempty"`
	RefBlockNum   int64          `json:"ref_block_num,omitempty"`
	RefBlockHash  string         `json:"ref_block_hash,omitempty"`
	Expiration    int64          `json:"expiration,omitempty"`
	Data          string         `json:"data,omitempty"`
	Timestamp     int64          `json:"timestamp,omitempty"`
	FeeLimit      int64          `json:"fee_limit,omitempty"`
}

type contractJSON struct {
	Parameter struct {
		Value   json.RawMessage `json:"value"`
		TypeURL string          `json:"type_url"`
	} `json:"parameter"`
	Type         string `json:"type"`
	PermissionID int32  `json:"Permission_id,omitempty"`
}

// JSON renders r as java-tron's raw_data object; addresses are Base58Check when visible,
// hex otherwise.
func (r *RawData) JSON(visible bool) (json.RawMessage, error) {
	if r.Contract == nil {
		return nil, errors.New("raw data: no contract")
	}
	value, err := json.Marshal(r.Contract.jsonValue(visible))
	if err != nil {
		return nil, err
	}
	var c contractJSON
	c.Parameter.Value = value
	c.Parameter.TypeURL = r.Contract.Type().TypeURL()
	c.Type = r.Contract.Type().String()
	c.PermissionID = r.PermissionID
	return json.Marshal(rawDataJSON{
		Contract:      []contractJSON{c},
		RefBlockBytes: hex.EncodeToString(r.RefBlockBytes),
		RefBlockNum:   r.RefBlockNum,
		RefBlockHash:  hex.EncodeToString(r.RefBlockHash),
		Expiration:    r.Expiration,
		Data:          hex.EncodeToString(r.Data),
		Timestamp:     r.Timestamp,
		FeeLimit:      r.FeeLimit,
	})
}

// ParseRawDataJSON reads java-tron's raw_data object; addresses may be in either form.
// Unknown fields are rejected for the same reason as in UnmarshalRawData.
func ParseRawDataJSON(b []byte) (*RawData, error) {
	var j rawDataJSON
	if err := strictJSON(b, &j); err != nil {
		return nil, fmt.Errorf("%w: raw_data: %w", ErrTxDecode, err)
	}
	if len(j.Contract) != 1 {
		return nil, fmt.Errorf("%w: raw_data has %d contracts, want 1", ErrTxDecode, len(j.Contract))
	}
	cj := j.Contract[0]
	typ, ok := contractTypeByName(cj.Type)
	if !ok {
		return nil, fmt.Errorf("%w: unsupported contract type %q", ErrTxDecode, cj.Type)
	}
	if cj.Parameter.TypeURL != typ.TypeURL() {
		return nil, fmt.Errorf("%w: contract %s has type_url %q", ErrTxDecode, typ, cj.Parameter.TypeURL)
	}
	c := newContract(typ)
	if len(cj.Parameter.Value) > 0 {
		if err := c.unmarshalJSON(cj.Parameter.Value); err != nil {
			return nil, fmt.Errorf("%w: %s value: %w", ErrTxDecode, typ, err)
		}
	}
	r := &RawData{
		RefBlockNum:  j.RefBlockNum,
		Expiration:   j.Expiration,
		Contract:     c,
		PermissionID: cj.PermissionID,
		Timestamp:    j.Timestamp,
		FeeLimit:     j.FeeLimit,
	}
	var err error
	for _, h := range []struct {
		name string
		in   string
		out  *[]byte
	}{{"ref_block_bytes", j.RefBlockBytes, &r.RefBlockBytes}, {"ref_block_hash", j.RefBlockHash, &r.RefBlockHash}, {"data", j.Data, &r.Data}} {
		if *h.out, err = hex.DecodeString(h.in); err != nil {
			return nil, fmt.Errorf("%w: %s is not hex", ErrTxDecode, h.name)
		}
		if len(*h.out) == 0 {
			*h.out = nil
		}
	}
	return r, nil
}

// TxID is the transaction id: sha256 of the raw_data protobuf bytes, as lowercase hex.
func TxID(raw []byte) string {
	h := sha256.Sum256(raw)
	return hex.EncodeToString(h[:])
}

// NewTransaction builds the unsigned transaction JSON for r the way java-tron prints it
// (raw_data, raw_data_hex, txID, visible). The simulator answers create calls with it.
func NewTransaction(r *RawData, visible bool) (*Transaction, error) {
	t, _, err := newTransaction(r, visible)
	return t, err
}

func newTransaction(r *RawData, visible bool) (*Transaction, []byte, error) {
	raw, err := r.Marshal()
	if err != nil {
		return nil, nil, err
	}
	js, err := r.JSON(visible)
	if err != nil {
		return nil, nil, err
	}
	return &Transaction{
		Visible:    visible,
		TxID:       TxID(raw),
		RawData:    js,
		RawDataHex: hex.EncodeToString(raw),
	}, raw, nil
}

// NewSignedTransaction is NewTransaction followed by SignTransaction, without decoding
// again what it has just encoded (a transaction made from r agrees with itself).
func NewSignedTransaction(r *RawData, visible bool, key PrivateKey) (*Transaction, error) {
	if err := checkSigner(r, key); err != nil {
		return nil, err
	}
	t, raw, err := newTransaction(r, visible)
	if err != nil {
		return nil, err
	}
	return t, sign(t, raw, key)
}

// Decode checks that the transaction agrees with itself and returns its content: the
// raw_data_hex bytes decode, txID is their sha256, and the raw_data JSON (which the node
// re-packs at broadcast) encodes to exactly the same bytes.
func (t *Transaction) Decode() (*RawData, []byte, error) {
	raw, err := hex.DecodeString(t.RawDataHex)
	if err != nil || len(raw) == 0 {
		return nil, nil, fmt.Errorf("%w: raw_data_hex is not hex", ErrTxDecode)
	}
	r, err := UnmarshalRawData(raw)
	if err != nil {
		return nil, nil, err
	}
	if id := TxID(raw); !strings.EqualFold(id, t.TxID) {
		return nil, nil, fmt.Errorf("%w: txID %s is not sha256(raw_data_hex) %s", ErrTxMismatch, t.TxID, id)
	}
	fromJSON, err := ParseRawDataJSON(t.RawData)
	if err != nil {
		return nil, nil, err
	}
	again, err := fromJSON.Marshal()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrTxDecode, err)
	}
	if !bytes.Equal(again, raw) {
		return nil, nil, fmt.Errorf("%w: raw_data JSON and raw_data_hex differ", ErrTxMismatch)
	}
	return r, raw, nil
}

// Intent is what the caller asked the node to build. CheckBuilt compares a node-built
// transaction with it before anything is signed.
type Intent struct {
	Contract     Contract
	PermissionID int32
	FeeLimit     int64  // must equal the built fee_limit (0 for non-contract calls)
	Data         []byte // memo; normally nil
	// Now, when set, bounds the expiration: after Now and at most MaxExpiry later
	// (java-tron refuses more than 24 h).
	Now       time.Time
	MaxExpiry time.Duration
}

// CheckBuilt verifies a transaction built by a node (delegateresource, createtransaction,
// triggersmartcontract, ...) against the intent: the transaction must be self-consistent
// (see Decode) and its contract, permission, fee limit and memo must be exactly the
// intended ones. A node that is wrong or hostile cannot get a different transfer signed.
func CheckBuilt(t *Transaction, want Intent) (*RawData, error) {
	r, _, err := t.Decode()
	if err != nil {
		return nil, err
	}
	if want.Contract == nil {
		return nil, errors.New("check: intent has no contract")
	}
	if r.Contract.Type() != want.Contract.Type() {
		return nil, fmt.Errorf("%w: contract is %s, want %s", ErrTxMismatch, r.Contract.Type(), want.Contract.Type())
	}
	if !bytes.Equal(r.Contract.appendProto(nil), want.Contract.appendProto(nil)) {
		return nil, fmt.Errorf("%w: %s parameters differ from the intent", ErrTxMismatch, r.Contract.Type())
	}
	if r.PermissionID != want.PermissionID {
		return nil, fmt.Errorf("%w: Permission_id %d, want %d", ErrTxMismatch, r.PermissionID, want.PermissionID)
	}
	if r.FeeLimit != want.FeeLimit {
		return nil, fmt.Errorf("%w: fee_limit %d, want %d", ErrTxMismatch, r.FeeLimit, want.FeeLimit)
	}
	if !bytes.Equal(r.Data, want.Data) {
		return nil, fmt.Errorf("%w: memo differs from the intent", ErrTxMismatch)
	}
	if !want.Now.IsZero() {
		maxExp := want.MaxExpiry
		if maxExp <= 0 {
			maxExp = 24 * time.Hour
		}
		exp := time.UnixMilli(r.Expiration)
		if !exp.After(want.Now) || exp.After(want.Now.Add(maxExp)) {
			return nil, fmt.Errorf("%w: expiration %s outside (%s, +%s]", ErrTxMismatch, exp.UTC(), want.Now.UTC(), maxExp)
		}
	}
	return r, nil
}

// SignTransaction appends key's signature (65 bytes r||s||v, hex) over the txID. The
// transaction must be self-consistent, and with Permission_id 0 key must be the owner:
// a signature by anyone else would only be rejected by the network later. Callers check
// a node-built transaction with CheckBuilt first.
func SignTransaction(t *Transaction, key PrivateKey) error {
	r, raw, err := t.Decode()
	if err != nil {
		return err
	}
	if err := checkSigner(r, key); err != nil {
		return err
	}
	return sign(t, raw, key)
}

func checkSigner(r *RawData, key PrivateKey) error {
	if r.PermissionID == 0 && r.Contract.Owner() != key.Address() {
		return fmt.Errorf("%w: signer %s is not the owner %s", ErrTxMismatch, key.Address(), r.Contract.Owner())
	}
	return nil
}

func sign(t *Transaction, raw []byte, key PrivateKey) error {
	h := sha256.Sum256(raw)
	sig, err := key.SignHash(h[:])
	if err != nil {
		return err
	}
	t.Signature = append(t.Signature, hex.EncodeToString(sig))
	return nil
}

// VerifyTransaction checks a signed transaction: self-consistent, at least one signature,
// every signature recovers, and with Permission_id 0 the first signer is the contract
// owner. It returns the signers in order.
func VerifyTransaction(t *Transaction) ([]Address, error) {
	r, raw, err := t.Decode()
	if err != nil {
		return nil, err
	}
	if len(t.Signature) == 0 {
		return nil, errors.New("verify: transaction is not signed")
	}
	h := sha256.Sum256(raw)
	signers := make([]Address, 0, len(t.Signature))
	for i, s := range t.Signature {
		sig, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
		if err != nil {
			return nil, fmt.Errorf("verify: signature %d is not hex", i)
		}
		a, err := RecoverHash(h[:], sig)
		if err != nil {
			return nil, fmt.Errorf("verify: signature %d: %w", i, err)
		}
		signers = append(signers, a)
	}
	if r.PermissionID == 0 && signers[0] != r.Contract.Owner() {
		return nil, fmt.Errorf("verify: signed by %s, owner is %s", signers[0], r.Contract.Owner())
	}
	return signers, nil
}
