package tron

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/encoding/protowire"
)

// The contracts the service builds, signs or reads, encoded by hand with protowire.
// Field numbers are those of tronprotocol/protocol core/contract/*.proto (checked against
// release 4.8.1): balance_contract.proto (TransferContract, DelegateResourceContract,
// UnDelegateResourceContract), account_contract.proto (AccountCreateContract),
// smart_contract.proto (TriggerSmartContract). Encoding follows proto3: fields in number
// order, defaults omitted, which is what java-tron (protobuf-java) and TronWeb
// (google-protobuf) emit, so bytes compare exactly.

// ContractType is protocol.Transaction.Contract.ContractType.
type ContractType int32

// ContractType values from core/Tron.proto.
const (
	AccountCreateContractType      ContractType = 0
	TransferContractType           ContractType = 1
	TriggerSmartContractType       ContractType = 31
	DelegateResourceContractType   ContractType = 57
	UnDelegateResourceContractType ContractType = 58
)

var contractTypeNames = map[ContractType]string{
	AccountCreateContractType:      "AccountCreateContract",
	TransferContractType:           "TransferContract",
	TriggerSmartContractType:       "TriggerSmartContract",
	DelegateResourceContractType:   "DelegateResourceContract",
	UnDelegateResourceContractType: "UnDelegateResourceContract",
	// permission.go
	AccountPermissionUpdateContractType: "AccountPermissionUpdateContract",
	FreezeBalanceV2ContractType:         "FreezeBalanceV2Contract",
	UnfreezeBalanceV2ContractType:       "UnfreezeBalanceV2Contract",
	WithdrawExpireUnfreezeContractType:  "WithdrawExpireUnfreezeContract",
	CancelAllUnfreezeV2ContractType:     "CancelAllUnfreezeV2Contract",
}

// String is the enum name java-tron prints in "type" (and the message name in type_url).
func (t ContractType) String() string {
	if n, ok := contractTypeNames[t]; ok {
		return n
	}
	return "ContractType(" + strconv.Itoa(int(t)) + ")"
}

// TypeURL is the google.protobuf.Any type_url of the contract's parameter.
func (t ContractType) TypeURL() string { return "type.googleapis.com/protocol." + t.String() }

func contractTypeByName(name string) (ContractType, bool) {
	for t, n := range contractTypeNames {
		if n == name {
			return t, true
		}
	}
	return 0, false
}

// newContract returns an empty contract of type t, or nil when the codec does not know t.
func newContract(t ContractType) Contract {
	switch t {
	case AccountCreateContractType:
		return &AccountCreateContract{}
	case TransferContractType:
		return &TransferContract{}
	case TriggerSmartContractType:
		return &TriggerSmartContract{}
	case DelegateResourceContractType:
		return &DelegateResourceContract{}
	case UnDelegateResourceContractType:
		return &UnDelegateResourceContract{}
	case AccountPermissionUpdateContractType:
		return &AccountPermissionUpdateContract{}
	case FreezeBalanceV2ContractType:
		return &FreezeBalanceV2Contract{}
	case UnfreezeBalanceV2ContractType:
		return &UnfreezeBalanceV2Contract{}
	case WithdrawExpireUnfreezeContractType, CancelAllUnfreezeV2ContractType:
		return &OwnerOnlyContract{Kind: t}
	}
	return nil
}

// Contract is one of the typed contracts below. Only those types are supported: a
// transaction carrying anything else is rejected rather than signed blind.
type Contract interface {
	Type() ContractType
	// Owner is the account that pays and must sign.
	Owner() Address
	// appendProto appends the contract message's protobuf encoding.
	appendProto(b []byte) []byte
	// unmarshalProto reads the message; unknown fields are an error.
	unmarshalProto(b []byte) error
	// jsonValue is java-tron's JSON of the message (parameter.value).
	jsonValue(visible bool) any
	// unmarshalJSON reads parameter.value; addresses may be in either form.
	unmarshalJSON(b []byte) error
}

// ResourceCode is protocol.ResourceCode.
type ResourceCode int32

// ResourceCode values from core/contract/common.proto.
const (
	Bandwidth ResourceCode = 0
	Energy    ResourceCode = 1
	TronPower ResourceCode = 2
)

// String is the enum name java-tron prints.
func (r ResourceCode) String() string {
	switch r {
	case Bandwidth:
		return ResourceBandwidth
	case Energy:
		return ResourceEnergy
	case TronPower:
		return "TRON_POWER"
	}
	return strconv.Itoa(int(r))
}

// ParseResourceCode reads "BANDWIDTH", "ENERGY" or "TRON_POWER".
func ParseResourceCode(s string) (ResourceCode, error) {
	switch s {
	case ResourceBandwidth:
		return Bandwidth, nil
	case ResourceEnergy:
		return Energy, nil
	case "TRON_POWER":
		return TronPower, nil
	}
	return 0, fmt.Errorf("unknown resource %q", s)
}

// MarshalJSON prints the enum name.
func (r ResourceCode) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// UnmarshalJSON accepts the enum name or its number.
func (r *ResourceCode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := ParseResourceCode(s)
		*r = v
		return err
	}
	var n int32
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("resource: %w", err)
	}
	*r = ResourceCode(n)
	return nil
}

// AccountType is protocol.AccountType (AccountCreateContract.type).
type AccountType int32

// AccountType values from core/Tron.proto.
const (
	AccountNormal     AccountType = 0
	AccountAssetIssue AccountType = 1
	AccountContract   AccountType = 2
)

var accountTypeNames = []string{"Normal", "AssetIssue", "Contract"}

// MarshalJSON prints the enum name.
func (t AccountType) MarshalJSON() ([]byte, error) {
	if t >= 0 && int(t) < len(accountTypeNames) {
		return json.Marshal(accountTypeNames[t])
	}
	return json.Marshal(int32(t))
}

// UnmarshalJSON accepts the enum name or its number.
func (t *AccountType) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		for i, n := range accountTypeNames {
			if n == s {
				*t = AccountType(i)
				return nil
			}
		}
		return fmt.Errorf("unknown account type %q", s)
	}
	var n int32
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("account type: %w", err)
	}
	*t = AccountType(n)
	return nil
}

// TransferContract moves Amount SUN of TRX; it activates To if needed.
type TransferContract struct {
	OwnerAddress Address
	ToAddress    Address
	Amount       int64
}

// AccountCreateContract activates AccountAddress, paid by OwnerAddress.
type AccountCreateContract struct {
	OwnerAddress   Address
	AccountAddress Address
	AccountType    AccountType
}

// TriggerSmartContract calls ContractAddress with Data (selector + ABI arguments).
type TriggerSmartContract struct {
	OwnerAddress    Address
	ContractAddress Address
	CallValue       int64
	Data            []byte
	CallTokenValue  int64
	TokenID         int64
}

// DelegateResourceContract delegates the resource of Balance SUN of staked TRX to
// ReceiverAddress. LockPeriod is in 3-second blocks and applies when Lock is set.
type DelegateResourceContract struct {
	OwnerAddress    Address
	Resource        ResourceCode
	Balance         int64
	ReceiverAddress Address
	Lock            bool
	LockPeriod      int64
}

// UnDelegateResourceContract takes back Balance SUN of a delegation.
type UnDelegateResourceContract struct {
	OwnerAddress    Address
	Resource        ResourceCode
	Balance         int64
	ReceiverAddress Address
}

func (*TransferContract) Type() ContractType           { return TransferContractType }
func (*AccountCreateContract) Type() ContractType      { return AccountCreateContractType }
func (*TriggerSmartContract) Type() ContractType       { return TriggerSmartContractType }
func (*DelegateResourceContract) Type() ContractType   { return DelegateResourceContractType }
func (*UnDelegateResourceContract) Type() ContractType { return UnDelegateResourceContractType }

func (c *TransferContract) Owner() Address           { return c.OwnerAddress }
func (c *AccountCreateContract) Owner() Address      { return c.OwnerAddress }
func (c *TriggerSmartContract) Owner() Address       { return c.OwnerAddress }
func (c *DelegateResourceContract) Owner() Address   { return c.OwnerAddress }
func (c *UnDelegateResourceContract) Owner() Address { return c.OwnerAddress }

// ---- protobuf ----

func appendAddr(b []byte, num protowire.Number, a Address) []byte {
	if a.IsZero() {
		return b
	}
	return appendBytes(b, num, a[:])
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func (c *TransferContract) appendProto(b []byte) []byte {
	b = appendAddr(b, 1, c.OwnerAddress)
	b = appendAddr(b, 2, c.ToAddress)
	return appendVarint(b, 3, uint64(c.Amount))
}

func (c *AccountCreateContract) appendProto(b []byte) []byte {
	b = appendAddr(b, 1, c.OwnerAddress)
	b = appendAddr(b, 2, c.AccountAddress)
	// Enums are int32 on the wire, sign-extended to 64 bits like int64.
	return appendVarint(b, 3, uint64(int64(c.AccountType)))
}

func (c *TriggerSmartContract) appendProto(b []byte) []byte {
	b = appendAddr(b, 1, c.OwnerAddress)
	b = appendAddr(b, 2, c.ContractAddress)
	b = appendVarint(b, 3, uint64(c.CallValue))
	b = appendBytes(b, 4, c.Data)
	b = appendVarint(b, 5, uint64(c.CallTokenValue))
	return appendVarint(b, 6, uint64(c.TokenID))
}

func (c *DelegateResourceContract) appendProto(b []byte) []byte {
	b = appendAddr(b, 1, c.OwnerAddress)
	b = appendVarint(b, 2, uint64(int64(c.Resource)))
	b = appendVarint(b, 3, uint64(c.Balance))
	b = appendAddr(b, 4, c.ReceiverAddress)
	b = appendVarint(b, 5, protowire.EncodeBool(c.Lock))
	return appendVarint(b, 6, uint64(c.LockPeriod))
}

func (c *UnDelegateResourceContract) appendProto(b []byte) []byte {
	b = appendAddr(b, 1, c.OwnerAddress)
	b = appendVarint(b, 2, uint64(int64(c.Resource)))
	b = appendVarint(b, 3, uint64(c.Balance))
	return appendAddr(b, 4, c.ReceiverAddress)
}

// field is one decoded protobuf field; walkFields hands each to fn.
type field struct {
	num    protowire.Number
	typ    protowire.Type
	varint uint64
	bytes  []byte
}

func walkFields(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("protobuf: %w", protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.varint, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(b)
		default:
			return fmt.Errorf("protobuf: field %d has unsupported wire type %d", num, typ)
		}
		if n < 0 {
			return fmt.Errorf("protobuf: field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

func (f field) want(t protowire.Type) error {
	if f.typ != t {
		return fmt.Errorf("protobuf: field %d has wire type %d, want %d", f.num, f.typ, t)
	}
	return nil
}

func (f field) addr(dst *Address) error {
	if err := f.want(protowire.BytesType); err != nil {
		return err
	}
	a, err := AddressFromBytes(f.bytes)
	if err != nil || len(f.bytes) != AddressLen {
		return fmt.Errorf("protobuf: field %d: %w", f.num, ErrInvalidAddress)
	}
	*dst = a
	return nil
}

func (f field) int64(dst *int64) error {
	if err := f.want(protowire.VarintType); err != nil {
		return err
	}
	*dst = int64(f.varint)
	return nil
}

func (f field) int32(dst *int32) error {
	if err := f.want(protowire.VarintType); err != nil {
		return err
	}
	*dst = int32(f.varint)
	return nil
}

func (f field) copyBytes(dst *[]byte) error {
	if err := f.want(protowire.BytesType); err != nil {
		return err
	}
	*dst = bytes.Clone(f.bytes)
	return nil
}

func unknownField(msg string, f field) error {
	return fmt.Errorf("protobuf: %s has unsupported field %d", msg, f.num)
}

func (c *TransferContract) unmarshalProto(b []byte) error {
	*c = TransferContract{}
	return walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.addr(&c.OwnerAddress)
		case 2:
			return f.addr(&c.ToAddress)
		case 3:
			return f.int64(&c.Amount)
		}
		return unknownField("TransferContract", f)
	})
}

func (c *AccountCreateContract) unmarshalProto(b []byte) error {
	*c = AccountCreateContract{}
	return walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.addr(&c.OwnerAddress)
		case 2:
			return f.addr(&c.AccountAddress)
		case 3:
			return f.int32((*int32)(&c.AccountType))
		}
		return unknownField("AccountCreateContract", f)
	})
}

func (c *TriggerSmartContract) unmarshalProto(b []byte) error {
	*c = TriggerSmartContract{}
	return walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.addr(&c.OwnerAddress)
		case 2:
			return f.addr(&c.ContractAddress)
		case 3:
			return f.int64(&c.CallValue)
		case 4:
			return f.copyBytes(&c.Data)
		case 5:
			return f.int64(&c.CallTokenValue)
		case 6:
			return f.int64(&c.TokenID)
		}
		return unknownField("TriggerSmartContract", f)
	})
}

func (c *DelegateResourceContract) unmarshalProto(b []byte) error {
	*c = DelegateResourceContract{}
	return walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.addr(&c.OwnerAddress)
		case 2:
			return f.int32((*int32)(&c.Resource))
		case 3:
			return f.int64(&c.Balance)
		case 4:
			return f.addr(&c.ReceiverAddress)
		case 5:
			if err := f.want(protowire.VarintType); err != nil {
				return err
			}
			c.Lock = protowire.DecodeBool(f.varint)
			return nil
		case 6:
			return f.int64(&c.LockPeriod)
		}
		return unknownField("DelegateResourceContract", f)
	})
}

func (c *UnDelegateResourceContract) unmarshalProto(b []byte) error {
	*c = UnDelegateResourceContract{}
	return walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.addr(&c.OwnerAddress)
		case 2:
			return f.int32((*int32)(&c.Resource))
		case 3:
			return f.int64(&c.Balance)
		case 4:
			return f.addr(&c.ReceiverAddress)
		}
		return unknownField("UnDelegateResourceContract", f)
	})
}

// ---- JSON (parameter.value) ----

// jsonAddr prints an address per visible and reads either form; the zero address is
// absent, as java-tron omits empty bytes.
type jsonAddr struct {
	a       Address
	visible bool
}

func (j jsonAddr) MarshalText() ([]byte, error) { return []byte(FormatAddress(j.a, j.visible)), nil }

func (j *jsonAddr) UnmarshalText(b []byte) error {
	a, err := ParseAddress(string(b))
	j.a = a
	return err
}

func optAddr(a Address, visible bool) *jsonAddr {
	if a.IsZero() {
		return nil
	}
	return &jsonAddr{a, visible}
}

func addrOf(j *jsonAddr) Address {
	if j == nil {
		return Address{}
	}
	return j.a
}

type transferJSON struct {
	Amount       int64     `json:"amount,omitempty"`
	OwnerAddress *jsonAddr `json:"owner_address,omitempty"`
	ToAddress    *jsonAddr `json:"to_address,omitempty"`
}

type accountCreateJSON struct {
	OwnerAddress   *jsonAddr   `json:"owner_address,omitempty"`
	AccountAddress *jsonAddr   `json:"account_address,omitempty"`
	Type           AccountType `json:"type,omitempty"`
}

type triggerJSON struct {
	Data            string    `json:"data,omitempty"`
	OwnerAddress    *jsonAddr `json:"owner_address,omitempty"`
	ContractAddress *jsonAddr `json:"contract_address,omitempty"`
	CallValue       int64     `json:"call_value,omitempty"`
	CallTokenValue  int64     `json:"call_token_value,omitempty"`
	TokenID         int64     `json:"token_id,omitempty"`
}

type delegateJSON struct {
	Balance         int64        `json:"balance,omitempty"`
	Resource        ResourceCode `json:"resource,omitempty"`
	ReceiverAddress *jsonAddr    `json:"receiver_address,omitempty"`
	OwnerAddress    *jsonAddr    `json:"owner_address,omitempty"`
	Lock            bool         `json:"lock,omitempty"`
	LockPeriod      int64        `json:"lock_period,omitempty"`
}

type undelegateJSON struct {
	Balance         int64        `json:"balance,omitempty"`
	Resource        ResourceCode `json:"resource,omitempty"`
	ReceiverAddress *jsonAddr    `json:"receiver_address,omitempty"`
	OwnerAddress    *jsonAddr    `json:"owner_address,omitempty"`
}

// strictJSON decodes b into v refusing unknown fields: a field the codec does not model
// could change the bytes java-tron packs at broadcast.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after JSON value")
	}
	return nil
}

func (c *TransferContract) jsonValue(visible bool) any {
	return transferJSON{c.Amount, optAddr(c.OwnerAddress, visible), optAddr(c.ToAddress, visible)}
}

func (c *TransferContract) unmarshalJSON(b []byte) error {
	var j transferJSON
	if err := strictJSON(b, &j); err != nil {
		return err
	}
	*c = TransferContract{addrOf(j.OwnerAddress), addrOf(j.ToAddress), j.Amount}
	return nil
}

func (c *AccountCreateContract) jsonValue(visible bool) any {
	return accountCreateJSON{optAddr(c.OwnerAddress, visible), optAddr(c.AccountAddress, visible), c.AccountType}
}

func (c *AccountCreateContract) unmarshalJSON(b []byte) error {
	var j accountCreateJSON
	if err := strictJSON(b, &j); err != nil {
		return err
	}
	*c = AccountCreateContract{addrOf(j.OwnerAddress), addrOf(j.AccountAddress), j.Type}
	return nil
}

func (c *TriggerSmartContract) jsonValue(visible bool) any {
	return triggerJSON{hex.EncodeToString(c.Data), optAddr(c.OwnerAddress, visible),
		optAddr(c.ContractAddress, visible), c.CallValue, c.CallTokenValue, c.TokenID}
}

func (c *TriggerSmartContract) unmarshalJSON(b []byte) error {
	var j triggerJSON
	if err := strictJSON(b, &j); err != nil {
		return err
	}
	data, err := hex.DecodeString(j.Data)
	if err != nil {
		return fmt.Errorf("data: not hex")
	}
	if len(data) == 0 {
		data = nil
	}
	*c = TriggerSmartContract{addrOf(j.OwnerAddress), addrOf(j.ContractAddress), j.CallValue, data, j.CallTokenValue, j.TokenID}
	return nil
}

func (c *DelegateResourceContract) jsonValue(visible bool) any {
	return delegateJSON{c.Balance, c.Resource, optAddr(c.ReceiverAddress, visible),
		optAddr(c.OwnerAddress, visible), c.Lock, c.LockPeriod}
}

func (c *DelegateResourceContract) unmarshalJSON(b []byte) error {
	var j delegateJSON
	if err := strictJSON(b, &j); err != nil {
		return err
	}
	*c = DelegateResourceContract{addrOf(j.OwnerAddress), j.Resource, j.Balance, addrOf(j.ReceiverAddress), j.Lock, j.LockPeriod}
	return nil
}

func (c *UnDelegateResourceContract) jsonValue(visible bool) any {
	return undelegateJSON{c.Balance, c.Resource, optAddr(c.ReceiverAddress, visible), optAddr(c.OwnerAddress, visible)}
}

func (c *UnDelegateResourceContract) unmarshalJSON(b []byte) error {
	var j undelegateJSON
	if err := strictJSON(b, &j); err != nil {
		return err
	}
	*c = UnDelegateResourceContract{addrOf(j.OwnerAddress), j.Resource, j.Balance, addrOf(j.ReceiverAddress)}
	return nil
}
