package tron

// Wire types of the java-tron HTTP API (/wallet/*), shared by the client, the node
// simulator (infra/tronsim) and chainwatch. JSON names are java-tron's exactly; they come
// from the protocol protos (core/Tron.proto, api/api.proto) as printed by java-tron's
// JsonFormat, with these rules the code relies on:
//
//   - int64 fields are JSON numbers; enum fields are their names ("ENERGY", "SUCCESS").
//   - proto3 defaults are omitted: a zero amount, a false bool and the first enum value
//     (BANDWIDTH, SUCESS, Normal) do not appear. Every field here therefore tolerates absence.
//   - bytes fields are hex without 0x. With visible=true, address fields (owner_address,
//     to_address, Account.address, DelegatedResource.from/to, Log.address,
//     TransactionInfo.contract_address, witness_address, ...) are Base58Check instead, and
//     TransactionInfo.resMessage is plain text instead of hex. Log.address is 20-byte hex
//     (no 41 prefix) when visible=false. Address fields are kept as strings so the simulator
//     can print either form; ParseAnyAddress reads all of them.
//   - An object that does not exist is printed as "{}" (unknown account, empty block list).
//   - Failures of most servlets are a 200 response with {"Error": "class ... : message"}.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// Resource names as java-tron prints ResourceCode.
const (
	ResourceBandwidth = "BANDWIDTH"
	ResourceEnergy    = "ENERGY"
)

// Block is Util.printBlock: the Block message plus "blockID" (and each transaction's txID
// and raw_data_hex). getnowblock, getblockbynum and getblockbylimitnext return it.
type Block struct {
	BlockID      string        `json:"blockID"`
	BlockHeader  BlockHeader   `json:"block_header"`
	Transactions []Transaction `json:"transactions,omitempty"`
}

// BlockHeader is protocol.BlockHeader.
type BlockHeader struct {
	RawData          BlockHeaderRaw `json:"raw_data"`
	WitnessSignature string         `json:"witness_signature,omitempty"`
}

// BlockHeaderRaw is protocol.BlockHeader.raw. Timestamp is in milliseconds.
type BlockHeaderRaw struct {
	Number         int64  `json:"number,omitempty"`
	TxTrieRoot     string `json:"txTrieRoot,omitempty"`
	WitnessAddress string `json:"witness_address,omitempty"`
	ParentHash     string `json:"parentHash,omitempty"`
	Version        int32  `json:"version,omitempty"`
	Timestamp      int64  `json:"timestamp,omitempty"`
}

// Number is the block height (genesis is 0, which java-tron omits).
func (b *Block) Number() int64 { return b.BlockHeader.RawData.Number }

// ParentHash is the parent's blockID.
func (b *Block) ParentHash() string { return b.BlockHeader.RawData.ParentHash }

// Timestamp is the block time in milliseconds since the epoch.
func (b *Block) Timestamp() int64 { return b.BlockHeader.RawData.Timestamp }

// BlockList is getblockbylimitnext's answer ({} when the range is empty).
type BlockList struct {
	Block []Block `json:"block,omitempty"`
}

// Transaction is Util.printTransactionToJSON (plus "visible" on create responses).
//
// RawData is kept as the node printed it: broadcasttransaction rebuilds the protobuf from
// this JSON (Util.packTransaction), so re-encoding it through Go structs could change the
// bytes the signature covers. Use ParseRawDataJSON to read it; broadcast it unchanged.
type Transaction struct {
	Visible         bool                `json:"visible,omitempty"`
	TxID            string              `json:"txID"`
	RawData         json.RawMessage     `json:"raw_data"`
	RawDataHex      string              `json:"raw_data_hex"`
	Signature       []string            `json:"signature,omitempty"`
	Ret             []TransactionResult `json:"ret,omitempty"`
	ContractAddress string              `json:"contract_address,omitempty"`
}

// TransactionResult is protocol.Transaction.Result as found in a block's transactions.
// ContractRet is "SUCCESS", "REVERT", "OUT_OF_ENERGY", ...; absent means DEFAULT.
type TransactionResult struct {
	Fee         int64  `json:"fee,omitempty"`
	Ret         string `json:"ret,omitempty"` // "FAILED" or absent (SUCESS)
	ContractRet string `json:"contractRet,omitempty"`
}

// Succeeded reports whether the block recorded the transaction as successful. TRX
// transfers and resource contracts carry contractRet SUCCESS when they went through.
func (t *Transaction) Succeeded() bool {
	return len(t.Ret) > 0 && t.Ret[0].Ret != "FAILED" && t.Ret[0].ContractRet == "SUCCESS"
}

// ContractTypeName reads raw_data.contract[0].type ("TransferContract", ...) without
// decoding the rest, so a block scanner can skip the many contract types the codec does
// not model before calling Decode on the ones it does. "" when absent or unreadable.
func (t *Transaction) ContractTypeName() string {
	var r struct {
		Contract []struct {
			Type string `json:"type"`
		} `json:"contract"`
	}
	if json.Unmarshal(t.RawData, &r) != nil || len(r.Contract) == 0 {
		return ""
	}
	return r.Contract[0].Type
}

// TransactionInfo is protocol.TransactionInfo (gettransactioninfobyid and, as a JSON
// array, gettransactioninfobyblocknum). An unknown id is "{}" (ID empty).
type TransactionInfo struct {
	ID              string          `json:"id"`
	Fee             int64           `json:"fee,omitempty"`
	BlockNumber     int64           `json:"blockNumber,omitempty"`
	BlockTimeStamp  int64           `json:"blockTimeStamp,omitempty"`
	ContractResult  []string        `json:"contractResult,omitempty"`
	ContractAddress string          `json:"contract_address,omitempty"`
	Receipt         ResourceReceipt `json:"receipt"`
	Log             []Log           `json:"log,omitempty"`
	Result          string          `json:"result,omitempty"`     // "FAILED" or absent
	ResMessage      string          `json:"resMessage,omitempty"` // hex unless visible
	PackingFee      int64           `json:"packingFee,omitempty"`
	UnfreezeAmount  int64           `json:"unfreeze_amount,omitempty"`
	WithdrawExpire  int64           `json:"withdraw_expire_amount,omitempty"`
}

// Failed reports a transaction that landed but did not execute (out of energy, revert,
// validation failure at execution).
func (ti *TransactionInfo) Failed() bool {
	return ti.Result == "FAILED" || (ti.Receipt.Result != "" && ti.Receipt.Result != "SUCCESS")
}

// ResourceReceipt is protocol.ResourceReceipt. Result is a contractResult name; it is
// present for smart-contract calls and absent (DEFAULT) for plain transfers.
type ResourceReceipt struct {
	EnergyUsage        int64  `json:"energy_usage,omitempty"`
	EnergyFee          int64  `json:"energy_fee,omitempty"`
	OriginEnergyUsage  int64  `json:"origin_energy_usage,omitempty"`
	EnergyUsageTotal   int64  `json:"energy_usage_total,omitempty"`
	NetUsage           int64  `json:"net_usage,omitempty"`
	NetFee             int64  `json:"net_fee,omitempty"`
	Result             string `json:"result,omitempty"`
	EnergyPenaltyTotal int64  `json:"energy_penalty_total,omitempty"`
}

// Log is protocol.TransactionInfo.Log. Topics and Data are hex; Address is the emitting
// contract (20-byte hex without visible, Base58Check with it).
type Log struct {
	Address string   `json:"address,omitempty"`
	Topics  []string `json:"topics,omitempty"`
	Data    string   `json:"data,omitempty"`
}

// Account is protocol.Account (getaccount). A never-activated address is "{}": Address
// is empty, see Exists.
type Account struct {
	Address      string `json:"address,omitempty"`
	AccountName  string `json:"account_name,omitempty"`
	Type         string `json:"type,omitempty"` // "Contract" for contracts, absent for Normal
	Balance      int64  `json:"balance,omitempty"`
	CreateTime   int64  `json:"create_time,omitempty"`
	LatestOpTime int64  `json:"latest_opration_time,omitempty"` // java-tron's spelling

	NetUsage              int64 `json:"net_usage,omitempty"`
	FreeNetUsage          int64 `json:"free_net_usage,omitempty"`
	LatestConsumeTime     int64 `json:"latest_consume_time,omitempty"`
	LatestConsumeFreeTime int64 `json:"latest_consume_free_time,omitempty"`
	NetWindowSize         int64 `json:"net_window_size,omitempty"`
	NetWindowOptimized    bool  `json:"net_window_optimized,omitempty"`

	FrozenV2   []FreezeV2   `json:"frozenV2,omitempty"`
	UnfrozenV2 []UnfreezeV2 `json:"unfrozenV2,omitempty"`

	DelegatedFrozenV2BalanceForBandwidth         int64 `json:"delegated_frozenV2_balance_for_bandwidth,omitempty"`
	AcquiredDelegatedFrozenV2BalanceForBandwidth int64 `json:"acquired_delegated_frozenV2_balance_for_bandwidth,omitempty"`

	AccountResource AccountResourceState `json:"account_resource"`

	// OwnerPermission and ActivePermission are the account's permissions (permission.go).
	OwnerPermission  *AccountPermission  `json:"owner_permission,omitempty"`
	ActivePermission []AccountPermission `json:"active_permission,omitempty"`
}

// Exists reports whether the node knows the account (it has been activated).
func (a *Account) Exists() bool { return a.Address != "" }

// FrozenV2Amount is the amount (SUN) staked for resource, "BANDWIDTH" or "ENERGY"
// ("TRON_POWER" too) and still held by the account. Delegating moves stake out of frozenV2
// into delegated_frozenV2_balance_for_*, so the account's whole stake is this plus that.
func (a *Account) FrozenV2Amount(resource string) int64 {
	var n int64
	for _, f := range a.FrozenV2 {
		if f.Resource() == resource {
			n += f.Amount
		}
	}
	return n
}

// FreezeV2 is protocol.Account.FreezeV2. Type is absent for BANDWIDTH (enum default).
type FreezeV2 struct {
	Type   string `json:"type,omitempty"`
	Amount int64  `json:"amount,omitempty"`
}

// Resource is Type with the omitted default filled in.
func (f FreezeV2) Resource() string {
	if f.Type == "" {
		return ResourceBandwidth
	}
	return f.Type
}

// UnfreezeV2 is protocol.Account.UnFreezeV2 (pending unstake).
type UnfreezeV2 struct {
	Type               string `json:"type,omitempty"`
	UnfreezeAmount     int64  `json:"unfreeze_amount,omitempty"`
	UnfreezeExpireTime int64  `json:"unfreeze_expire_time,omitempty"`
}

// AccountResourceState is protocol.Account.AccountResource (inside getaccount).
type AccountResourceState struct {
	EnergyUsage                               int64 `json:"energy_usage,omitempty"`
	LatestConsumeTimeForEnergy                int64 `json:"latest_consume_time_for_energy,omitempty"`
	EnergyWindowSize                          int64 `json:"energy_window_size,omitempty"`
	EnergyWindowOptimized                     bool  `json:"energy_window_optimized,omitempty"`
	DelegatedFrozenV2BalanceForEnergy         int64 `json:"delegated_frozenV2_balance_for_energy,omitempty"`
	AcquiredDelegatedFrozenV2BalanceForEnergy int64 `json:"acquired_delegated_frozenV2_balance_for_energy,omitempty"`
}

// AccountResource is api.AccountResourceMessage (getaccountresource). The capitalised
// names are java-tron's.
type AccountResource struct {
	FreeNetUsed          int64 `json:"freeNetUsed,omitempty"`
	FreeNetLimit         int64 `json:"freeNetLimit,omitempty"`
	NetUsed              int64 `json:"NetUsed,omitempty"`
	NetLimit             int64 `json:"NetLimit,omitempty"`
	TotalNetLimit        int64 `json:"TotalNetLimit,omitempty"`
	TotalNetWeight       int64 `json:"TotalNetWeight,omitempty"`
	TotalTronPowerWeight int64 `json:"TotalTronPowerWeight,omitempty"`
	TronPowerUsed        int64 `json:"tronPowerUsed,omitempty"`
	TronPowerLimit       int64 `json:"tronPowerLimit,omitempty"`
	EnergyUsed           int64 `json:"EnergyUsed,omitempty"`
	EnergyLimit          int64 `json:"EnergyLimit,omitempty"`
	TotalEnergyLimit     int64 `json:"TotalEnergyLimit,omitempty"`
	TotalEnergyWeight    int64 `json:"TotalEnergyWeight,omitempty"`
	StorageUsed          int64 `json:"storageUsed,omitempty"`
	StorageLimit         int64 `json:"storageLimit,omitempty"`
}

// DelegatedResource is protocol.DelegatedResource. Expire times are milliseconds; they
// are set only for locked delegations.
type DelegatedResource struct {
	From                      string `json:"from,omitempty"`
	To                        string `json:"to,omitempty"`
	FrozenBalanceForBandwidth int64  `json:"frozen_balance_for_bandwidth,omitempty"`
	FrozenBalanceForEnergy    int64  `json:"frozen_balance_for_energy,omitempty"`
	ExpireTimeForBandwidth    int64  `json:"expire_time_for_bandwidth,omitempty"`
	ExpireTimeForEnergy       int64  `json:"expire_time_for_energy,omitempty"`
}

// DelegatedResourceList is getdelegatedresourcev2's answer ({} when none).
type DelegatedResourceList struct {
	DelegatedResource []DelegatedResource `json:"delegatedResource,omitempty"`
}

// CanDelegatedMaxSize is getcandelegatedmaxsize's answer, in SUN.
type CanDelegatedMaxSize struct {
	MaxSize int64 `json:"max_size,omitempty"`
}

// ChainParameters is getchainparameters' answer. A parameter whose value is 0 has no
// "value" (proto3 default).
type ChainParameters struct {
	ChainParameter []ChainParameter `json:"chainParameter,omitempty"`
}

// ChainParameter is one key/value pair, e.g. {"key":"getEnergyFee","value":100}.
type ChainParameter struct {
	Key   string `json:"key"`
	Value int64  `json:"value,omitempty"`
}

// Get returns the parameter's value and whether the node listed it.
func (p *ChainParameters) Get(key string) (int64, bool) {
	for _, kv := range p.ChainParameter {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return 0, false
}

// Return is api.Return. Code is a response_code name ("SIGERROR",
// "CONTRACT_VALIDATE_ERROR", ...; absent for SUCCESS). Message is hex-encoded UTF-8 text
// in every mode (it is not one of java-tron's "name string" fields).
type Return struct {
	Result  bool   `json:"result,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// MessageText decodes Message; text that is not hex is returned as it is.
func (r *Return) MessageText() string { return DecodeHexText(r.Message) }

// BroadcastResult is broadcasttransaction's answer: api.Return plus the txid the node
// computed from the JSON it was given.
type BroadcastResult struct {
	Return
	TxID string `json:"txid,omitempty"`
}

// TransactionExtention is api.TransactionExtention as printed by triggersmartcontract and
// triggerconstantcontract. Transaction is present only when Result.Result is true.
type TransactionExtention struct {
	Result         Return       `json:"result"`
	TxID           string       `json:"txid,omitempty"`
	ConstantResult []string     `json:"constant_result,omitempty"`
	EnergyUsed     int64        `json:"energy_used,omitempty"`
	EnergyPenalty  int64        `json:"energy_penalty,omitempty"`
	Logs           []Log        `json:"logs,omitempty"`
	Transaction    *Transaction `json:"transaction,omitempty"`
}

// nodeError is the {"Error": "..."} body java-tron's Util.printErrorMsg writes.
type nodeError struct {
	Error string `json:"Error"`
}

// Request bodies of the POST endpoints. Address fields are strings in the form Visible
// announces (Base58Check when true, 41... hex when false).

// NumRequest is api.NumberMessage (getblockbynum, gettransactioninfobyblocknum).
type NumRequest struct {
	Num     int64 `json:"num"`
	Visible bool  `json:"visible"`
}

// BlockLimitRequest is api.BlockLimit (getblockbylimitnext): blocks [StartNum, EndNum).
type BlockLimitRequest struct {
	StartNum int64 `json:"startNum"`
	EndNum   int64 `json:"endNum"`
	Visible  bool  `json:"visible"`
}

// ValueRequest is api.BytesMessage (gettransactionbyid, gettransactioninfobyid); Value is
// the txid in hex.
type ValueRequest struct {
	Value   string `json:"value"`
	Visible bool   `json:"visible"`
}

// AddressRequest is the body of getaccount and getaccountresource.
type AddressRequest struct {
	Address string `json:"address"`
	Visible bool   `json:"visible"`
}

// DelegatedResourceRequest is api.DelegatedResourceMessage (getdelegatedresourcev2).
type DelegatedResourceRequest struct {
	FromAddress string `json:"fromAddress"`
	ToAddress   string `json:"toAddress"`
	Visible     bool   `json:"visible"`
}

// CanDelegatedMaxSizeRequest is api.CanDelegatedMaxSizeRequestMessage. Type is the
// ResourceCode number: 0 bandwidth, 1 energy.
type CanDelegatedMaxSizeRequest struct {
	OwnerAddress string `json:"owner_address"`
	Type         int32  `json:"type"`
	Visible      bool   `json:"visible"`
}

// DelegateResourceRequest is the body of delegateresource. LockPeriod is in 3-second
// blocks and only meaningful with Lock.
type DelegateResourceRequest struct {
	OwnerAddress    string `json:"owner_address"`
	ReceiverAddress string `json:"receiver_address"`
	Balance         int64  `json:"balance"`
	Resource        string `json:"resource"`
	Lock            bool   `json:"lock,omitempty"`
	LockPeriod      int64  `json:"lock_period,omitempty"`
	PermissionID    int32  `json:"Permission_id,omitempty"`
	Visible         bool   `json:"visible"`
}

// UnDelegateResourceRequest is the body of undelegateresource.
type UnDelegateResourceRequest struct {
	OwnerAddress    string `json:"owner_address"`
	ReceiverAddress string `json:"receiver_address"`
	Balance         int64  `json:"balance"`
	Resource        string `json:"resource"`
	PermissionID    int32  `json:"Permission_id,omitempty"`
	Visible         bool   `json:"visible"`
}

// CreateTransactionRequest is the body of createtransaction (a TRX transfer, in SUN).
type CreateTransactionRequest struct {
	OwnerAddress string `json:"owner_address"`
	ToAddress    string `json:"to_address"`
	Amount       int64  `json:"amount"`
	PermissionID int32  `json:"Permission_id,omitempty"`
	Visible      bool   `json:"visible"`
}

// CreateAccountRequest is the body of createaccount (activates AccountAddress, paid by
// OwnerAddress).
type CreateAccountRequest struct {
	OwnerAddress   string `json:"owner_address"`
	AccountAddress string `json:"account_address"`
	PermissionID   int32  `json:"Permission_id,omitempty"`
	Visible        bool   `json:"visible"`
}

// TriggerSmartContractRequest is the body of triggersmartcontract and
// triggerconstantcontract. Either FunctionSelector ("transfer(address,uint256)") with
// Parameter (hex of the ABI-encoded arguments, no selector), or Data (hex of the whole
// call data).
type TriggerSmartContractRequest struct {
	OwnerAddress     string `json:"owner_address"`
	ContractAddress  string `json:"contract_address"`
	FunctionSelector string `json:"function_selector,omitempty"`
	Parameter        string `json:"parameter,omitempty"`
	Data             string `json:"data,omitempty"`
	FeeLimit         int64  `json:"fee_limit,omitempty"`
	CallValue        int64  `json:"call_value,omitempty"`
	PermissionID     int32  `json:"Permission_id,omitempty"`
	Visible          bool   `json:"visible"`
}

// FormatAddress prints a in the form a java-tron response with the given visible flag uses.
func FormatAddress(a Address, visible bool) string {
	if visible {
		return a.String()
	}
	return a.Hex()
}

// ParseAnyAddress reads an address in any form java-tron prints: Base58Check, 41... hex,
// or the 20-byte hex of a log's address (visible=false). Failures wrap ErrInvalidAddress.
func ParseAnyAddress(s string) (Address, error) {
	if len(s) == 40 {
		b, err := hex.DecodeString(s)
		if err != nil {
			return Address{}, fmt.Errorf("%w: not hex", ErrInvalidAddress)
		}
		return AddressFromBytes(b)
	}
	return ParseAddress(s)
}

// DecodeHexText decodes hex-encoded UTF-8 text as java-tron prints byte messages; input
// that is not hex is returned unchanged (visible mode prints some of them as text).
func DecodeHexText(s string) string {
	if s == "" || len(s)%2 != 0 {
		return s
	}
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil {
		return s
	}
	return string(b)
}
