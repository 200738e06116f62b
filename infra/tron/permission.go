package tron

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Account permissions (java-tron's multi-signature model, core/Tron.proto Permission and
// Key, core/contract/account_contract.proto AccountPermissionUpdateContract). An account
// has one owner permission (id 0, may do anything), an optional witness permission (id 1)
// and up to eight active permissions (ids 2..9) each allowing the contract types set in
// its 32-byte operations mask (bit t of byte t/8 allows type t). A transaction names the
// permission that signs it in raw_data.contract[0].Permission_id.

// More contract types the codec reads (core/Tron.proto ContractType).
const (
	AccountPermissionUpdateContractType ContractType = 46
	FreezeBalanceV2ContractType         ContractType = 54
	UnfreezeBalanceV2ContractType       ContractType = 55
	WithdrawExpireUnfreezeContractType  ContractType = 56
	CancelAllUnfreezeV2ContractType     ContractType = 59
)

// PermissionType is protocol.Permission.PermissionType.
type PermissionType int32

// PermissionType values.
const (
	PermissionOwner   PermissionType = 0
	PermissionWitness PermissionType = 1
	PermissionActive  PermissionType = 2
)

var permissionTypeNames = []string{"Owner", "Witness", "Active"}

// String is the enum name java-tron prints.
func (t PermissionType) String() string {
	if t >= 0 && int(t) < len(permissionTypeNames) {
		return permissionTypeNames[t]
	}
	return fmt.Sprint(int32(t))
}

// MarshalJSON prints the enum name.
func (t PermissionType) MarshalJSON() ([]byte, error) {
	if t >= 0 && int(t) < len(permissionTypeNames) {
		return json.Marshal(permissionTypeNames[t])
	}
	return json.Marshal(int32(t))
}

// UnmarshalJSON accepts the enum name or its number.
func (t *PermissionType) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		for i, n := range permissionTypeNames {
			if n == s {
				*t = PermissionType(i)
				return nil
			}
		}
		return fmt.Errorf("unknown permission type %q", s)
	}
	var n int32
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("permission type: %w", err)
	}
	*t = PermissionType(n)
	return nil
}

// PermissionKey is protocol.Key: an address and its weight. Address holds the raw bytes
// as sent (java-tron validates them, "key is not a validate address").
type PermissionKey struct {
	Address []byte
	Weight  int64
}

// Permission is protocol.Permission.
type Permission struct {
	Type       PermissionType
	ID         int32
	Name       string
	Threshold  int64
	ParentID   int32
	Operations []byte // 32 bytes for an active permission, empty otherwise
	Keys       []PermissionKey
}

// Operations returns the 32-byte mask allowing exactly types.
func Operations(types ...ContractType) []byte {
	ops := make([]byte, 32)
	for _, t := range types {
		if t >= 0 && t < 256 {
			ops[t/8] |= 1 << (t % 8)
		}
	}
	return ops
}

// OperationsAllow reports whether mask allows contract type t (java-tron's
// checkPermissionOperations; a mask that is not 32 bytes allows nothing).
func OperationsAllow(mask []byte, t ContractType) bool {
	if len(mask) != 32 || t < 0 || t > 255 {
		return false
	}
	return mask[t/8]&(1<<(t%8)) != 0
}

// OperationTypes lists the contract types mask allows, lowest first.
func OperationTypes(mask []byte) []ContractType {
	var out []ContractType
	for i := 0; i < len(mask)*8 && i < 256; i++ {
		if mask[i/8]&(1<<(i%8)) != 0 {
			out = append(out, ContractType(i))
		}
	}
	return out
}

// AccountPermissionUpdateContract replaces an account's permissions (type 46).
// OwnerPerm (the "owner" field) is required; Witness only for witnesses; Actives get ids
// 2.. in their order.
type AccountPermissionUpdateContract struct {
	OwnerAddress Address
	OwnerPerm    *Permission
	Witness      *Permission
	Actives      []Permission
}

func (*AccountPermissionUpdateContract) Type() ContractType {
	return AccountPermissionUpdateContractType
}
func (c *AccountPermissionUpdateContract) Owner() Address { return c.OwnerAddress }

func appendKey(b []byte, k PermissionKey) []byte {
	var m []byte
	m = appendBytes(m, 1, k.Address)
	m = appendVarint(m, 2, uint64(k.Weight))
	b = protowire.AppendTag(b, 7, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func (p *Permission) appendProto(b []byte) []byte {
	b = appendVarint(b, 1, uint64(int64(p.Type)))
	b = appendVarint(b, 2, uint64(int64(p.ID)))
	b = appendBytes(b, 3, []byte(p.Name))
	b = appendVarint(b, 4, uint64(p.Threshold))
	b = appendVarint(b, 5, uint64(int64(p.ParentID)))
	b = appendBytes(b, 6, p.Operations)
	for _, k := range p.Keys {
		b = appendKey(b, k)
	}
	return b
}

func appendMessage(b []byte, num protowire.Number, m []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func (c *AccountPermissionUpdateContract) appendProto(b []byte) []byte {
	b = appendAddr(b, 1, c.OwnerAddress)
	if c.OwnerPerm != nil {
		b = appendMessage(b, 2, c.OwnerPerm.appendProto(nil))
	}
	if c.Witness != nil {
		b = appendMessage(b, 3, c.Witness.appendProto(nil))
	}
	for i := range c.Actives {
		b = appendMessage(b, 4, c.Actives[i].appendProto(nil))
	}
	return b
}

func (p *Permission) unmarshalProto(b []byte) error {
	*p = Permission{}
	return walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.int32((*int32)(&p.Type))
		case 2:
			return f.int32(&p.ID)
		case 3:
			if err := f.want(protowire.BytesType); err != nil {
				return err
			}
			p.Name = string(f.bytes)
			return nil
		case 4:
			return f.int64(&p.Threshold)
		case 5:
			return f.int32(&p.ParentID)
		case 6:
			return f.copyBytes(&p.Operations)
		case 7:
			if err := f.want(protowire.BytesType); err != nil {
				return err
			}
			var k PermissionKey
			err := walkFields(f.bytes, func(g field) error {
				switch g.num {
				case 1:
					return g.copyBytes(&k.Address)
				case 2:
					return g.int64(&k.Weight)
				}
				return unknownField("Key", g)
			})
			p.Keys = append(p.Keys, k)
			return err
		}
		return unknownField("Permission", f)
	})
}

func (c *AccountPermissionUpdateContract) unmarshalProto(b []byte) error {
	*c = AccountPermissionUpdateContract{}
	return walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.addr(&c.OwnerAddress)
		case 2, 3, 4:
			if err := f.want(protowire.BytesType); err != nil {
				return err
			}
			var p Permission
			if err := p.unmarshalProto(f.bytes); err != nil {
				return err
			}
			switch f.num {
			case 2:
				c.OwnerPerm = &p
			case 3:
				c.Witness = &p
			default:
				c.Actives = append(c.Actives, p)
			}
			return nil
		}
		return unknownField("AccountPermissionUpdateContract", f)
	})
}

// keyJSON and permissionJSON are java-tron's JSON of Key and Permission: a key's address
// is Base58Check when visible and hex otherwise, operations are hex, defaults omitted.
type keyJSON struct {
	Address string `json:"address,omitempty"`
	Weight  int64  `json:"weight,omitempty"`
}

type permissionJSON struct {
	Type       PermissionType `json:"type,omitempty"`
	ID         int32          `json:"id,omitempty"`
	Name       string         `json:"permission_name,omitempty"`
	Threshold  int64          `json:"threshold,omitempty"`
	ParentID   int32          `json:"parent_id,omitempty"`
	Operations string         `json:"operations,omitempty"`
	Keys       []keyJSON      `json:"keys,omitempty"`
}

func keyAddressText(b []byte, visible bool) string {
	if a, err := AddressFromBytes(b); err == nil && len(b) == AddressLen && visible {
		return a.String()
	}
	return hex.EncodeToString(b)
}

// JSONValue is p as java-tron prints it (getaccount, the contract's parameter.value).
func (p *Permission) JSONValue(visible bool) any { return p.toJSON(visible) }

func (p *Permission) toJSON(visible bool) permissionJSON {
	j := permissionJSON{Type: p.Type, ID: p.ID, Name: p.Name, Threshold: p.Threshold, ParentID: p.ParentID,
		Operations: hex.EncodeToString(p.Operations)}
	for _, k := range p.Keys {
		j.Keys = append(j.Keys, keyJSON{keyAddressText(k.Address, visible), k.Weight})
	}
	return j
}

// ParseKeyAddress reads a key's address as java-tron's JsonFormat does: Base58Check when
// visible, hex otherwise (either form is accepted here). Bytes that are no valid address
// are returned as they are, for the validation to refuse.
func ParseKeyAddress(s string) []byte {
	if a, err := ParseAddress(s); err == nil {
		return a[:]
	}
	if b, err := hex.DecodeString(strings.TrimPrefix(s, "0x")); err == nil {
		return b
	}
	return []byte(s)
}

func (j permissionJSON) permission() (Permission, error) {
	p := Permission{Type: j.Type, ID: j.ID, Name: j.Name, Threshold: j.Threshold, ParentID: j.ParentID}
	if j.Operations != "" {
		ops, err := hex.DecodeString(j.Operations)
		if err != nil {
			return p, fmt.Errorf("operations: not hex")
		}
		p.Operations = ops
	}
	for _, k := range j.Keys {
		p.Keys = append(p.Keys, PermissionKey{Address: ParseKeyAddress(k.Address), Weight: k.Weight})
	}
	return p, nil
}

// UnmarshalJSON reads java-tron's JSON of a Permission.
func (p *Permission) UnmarshalJSON(b []byte) error {
	var j permissionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	v, err := j.permission()
	*p = v
	return err
}

// MarshalJSON prints p with hex addresses (java-tron's visible=false).
func (p Permission) MarshalJSON() ([]byte, error) { return json.Marshal(p.toJSON(false)) }

type permissionUpdateJSON struct {
	OwnerAddress *jsonAddr        `json:"owner_address,omitempty"`
	Owner        *permissionJSON  `json:"owner,omitempty"`
	Witness      *permissionJSON  `json:"witness,omitempty"`
	Actives      []permissionJSON `json:"actives,omitempty"`
}

func (c *AccountPermissionUpdateContract) jsonValue(visible bool) any {
	j := permissionUpdateJSON{OwnerAddress: optAddr(c.OwnerAddress, visible)}
	if c.OwnerPerm != nil {
		o := c.OwnerPerm.toJSON(visible)
		j.Owner = &o
	}
	if c.Witness != nil {
		w := c.Witness.toJSON(visible)
		j.Witness = &w
	}
	for i := range c.Actives {
		j.Actives = append(j.Actives, c.Actives[i].toJSON(visible))
	}
	return j
}

func (c *AccountPermissionUpdateContract) unmarshalJSON(b []byte) error {
	var j permissionUpdateJSON
	if err := strictJSON(b, &j); err != nil {
		return err
	}
	*c = AccountPermissionUpdateContract{OwnerAddress: addrOf(j.OwnerAddress)}
	if j.Owner != nil {
		p, err := j.Owner.permission()
		if err != nil {
			return err
		}
		c.OwnerPerm = &p
	}
	if j.Witness != nil {
		p, err := j.Witness.permission()
		if err != nil {
			return err
		}
		c.Witness = &p
	}
	for _, a := range j.Actives {
		p, err := a.permission()
		if err != nil {
			return err
		}
		c.Actives = append(c.Actives, p)
	}
	return nil
}

// AccountPermission is a permission as getaccount prints it (owner_permission, each of
// active_permission). Addresses are in the form the request asked for.
type AccountPermission struct {
	Type       string `json:"type,omitempty"`
	ID         int32  `json:"id,omitempty"`
	Name       string `json:"permission_name,omitempty"`
	Threshold  int64  `json:"threshold,omitempty"`
	ParentID   int32  `json:"parent_id,omitempty"`
	Operations string `json:"operations,omitempty"`
	Keys       []struct {
		Address string `json:"address,omitempty"`
		Weight  int64  `json:"weight,omitempty"`
	} `json:"keys,omitempty"`
}

// Weight is the weight the permission gives addr (0 when addr holds no key in it).
func (p *AccountPermission) Weight(addr Address) int64 {
	for _, k := range p.Keys {
		if a, err := ParseAddress(k.Address); err == nil && a == addr {
			return k.Weight
		}
	}
	return 0
}

// Allowed lists the contract types the permission's operations allow (none for a
// permission without operations; an owner permission allows everything).
func (p *AccountPermission) Allowed() []ContractType {
	ops, err := hex.DecodeString(p.Operations)
	if err != nil || len(ops) != 32 {
		return nil
	}
	return OperationTypes(ops)
}

// Allows reports whether the permission's operations allow t.
func (p *AccountPermission) Allows(t ContractType) bool {
	ops, err := hex.DecodeString(p.Operations)
	return err == nil && OperationsAllow(ops, t)
}

// ---- Stake 2.0 contracts the chain follower reads from a pool (foreign use) ----

// FreezeBalanceV2Contract stakes FrozenBalance SUN for Resource (type 54).
type FreezeBalanceV2Contract struct {
	OwnerAddress  Address
	FrozenBalance int64
	Resource      ResourceCode
}

// UnfreezeBalanceV2Contract unstakes UnfreezeBalance SUN of Resource (type 55).
type UnfreezeBalanceV2Contract struct {
	OwnerAddress    Address
	UnfreezeBalance int64
	Resource        ResourceCode
}

// OwnerOnlyContract is a contract whose only field is owner_address:
// WithdrawExpireUnfreezeContract (56) and CancelAllUnfreezeV2Contract (59).
type OwnerOnlyContract struct {
	Kind         ContractType
	OwnerAddress Address
}

func (*FreezeBalanceV2Contract) Type() ContractType   { return FreezeBalanceV2ContractType }
func (*UnfreezeBalanceV2Contract) Type() ContractType { return UnfreezeBalanceV2ContractType }
func (c *OwnerOnlyContract) Type() ContractType       { return c.Kind }

func (c *FreezeBalanceV2Contract) Owner() Address   { return c.OwnerAddress }
func (c *UnfreezeBalanceV2Contract) Owner() Address { return c.OwnerAddress }
func (c *OwnerOnlyContract) Owner() Address         { return c.OwnerAddress }

func (c *FreezeBalanceV2Contract) appendProto(b []byte) []byte {
	b = appendAddr(b, 1, c.OwnerAddress)
	b = appendVarint(b, 2, uint64(c.FrozenBalance))
	return appendVarint(b, 3, uint64(int64(c.Resource)))
}

func (c *UnfreezeBalanceV2Contract) appendProto(b []byte) []byte {
	b = appendAddr(b, 1, c.OwnerAddress)
	b = appendVarint(b, 2, uint64(c.UnfreezeBalance))
	return appendVarint(b, 3, uint64(int64(c.Resource)))
}

func (c *OwnerOnlyContract) appendProto(b []byte) []byte { return appendAddr(b, 1, c.OwnerAddress) }

func (c *FreezeBalanceV2Contract) unmarshalProto(b []byte) error {
	*c = FreezeBalanceV2Contract{}
	return walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.addr(&c.OwnerAddress)
		case 2:
			return f.int64(&c.FrozenBalance)
		case 3:
			return f.int32((*int32)(&c.Resource))
		}
		return unknownField("FreezeBalanceV2Contract", f)
	})
}

func (c *UnfreezeBalanceV2Contract) unmarshalProto(b []byte) error {
	*c = UnfreezeBalanceV2Contract{}
	return walkFields(b, func(f field) error {
		switch f.num {
		case 1:
			return f.addr(&c.OwnerAddress)
		case 2:
			return f.int64(&c.UnfreezeBalance)
		case 3:
			return f.int32((*int32)(&c.Resource))
		}
		return unknownField("UnfreezeBalanceV2Contract", f)
	})
}

func (c *OwnerOnlyContract) unmarshalProto(b []byte) error {
	kind := c.Kind
	*c = OwnerOnlyContract{Kind: kind}
	return walkFields(b, func(f field) error {
		if f.num == 1 {
			return f.addr(&c.OwnerAddress)
		}
		return unknownField(kind.String(), f)
	})
}

type freezeV2JSON struct {
	OwnerAddress  *jsonAddr    `json:"owner_address,omitempty"`
	FrozenBalance int64        `json:"frozen_balance,omitempty"`
	Resource      ResourceCode `json:"resource,omitempty"`
}

type unfreezeV2JSON struct {
	OwnerAddress    *jsonAddr    `json:"owner_address,omitempty"`
	UnfreezeBalance int64        `json:"unfreeze_balance,omitempty"`
	Resource        ResourceCode `json:"resource,omitempty"`
}

type ownerOnlyJSON struct {
	OwnerAddress *jsonAddr `json:"owner_address,omitempty"`
}

func (c *FreezeBalanceV2Contract) jsonValue(visible bool) any {
	return freezeV2JSON{optAddr(c.OwnerAddress, visible), c.FrozenBalance, c.Resource}
}

func (c *UnfreezeBalanceV2Contract) jsonValue(visible bool) any {
	return unfreezeV2JSON{optAddr(c.OwnerAddress, visible), c.UnfreezeBalance, c.Resource}
}

func (c *OwnerOnlyContract) jsonValue(visible bool) any {
	return ownerOnlyJSON{optAddr(c.OwnerAddress, visible)}
}

func (c *FreezeBalanceV2Contract) unmarshalJSON(b []byte) error {
	var j freezeV2JSON
	if err := strictJSON(b, &j); err != nil {
		return err
	}
	*c = FreezeBalanceV2Contract{addrOf(j.OwnerAddress), j.FrozenBalance, j.Resource}
	return nil
}

func (c *UnfreezeBalanceV2Contract) unmarshalJSON(b []byte) error {
	var j unfreezeV2JSON
	if err := strictJSON(b, &j); err != nil {
		return err
	}
	*c = UnfreezeBalanceV2Contract{addrOf(j.OwnerAddress), j.UnfreezeBalance, j.Resource}
	return nil
}

func (c *OwnerOnlyContract) unmarshalJSON(b []byte) error {
	var j ownerOnlyJSON
	if err := strictJSON(b, &j); err != nil {
		return err
	}
	c.OwnerAddress = addrOf(j.OwnerAddress)
	return nil
}
