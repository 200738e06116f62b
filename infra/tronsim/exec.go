package tronsim

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"

	"rental/infra/tron"
)

// Energy the simulated USDT charges. The transfer figures are what the real USDT contract
// costs (a new holder pays for a fresh storage slot); the others are close approximations.
const (
	EnergyUSDTTransferToHolder = 64_285
	EnergyUSDTTransferToNew    = 130_285
	energyUSDTRevert           = 2_000
	energyUSDTRead             = 935
)

// TRC-20 function selectors (first 4 bytes of keccak256 of the signature).
var (
	selTransfer    = selector("transfer(address,uint256)")
	selBalanceOf   = selector("balanceOf(address)")
	selDecimals    = selector("decimals()")
	selSymbol      = selector("symbol()")
	selName        = selector("name()")
	selTotalSupply = selector("totalSupply()")
	// TransferTopic is topic0 of a TRC-20 Transfer log.
	TransferTopic = tron.Keccak256([]byte("Transfer(address,address,uint256)"))
)

func selector(sig string) []byte { return tron.Keccak256([]byte(sig))[:4] }

// validateError is java-tron's ContractValidateException: the transaction is refused and
// changes nothing. Msg is java-tron's message text.
type validateError struct{ Msg string }

func (e *validateError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &validateError{Msg: fmt.Sprintf(format, args...)}
}

// execCtx is the block context a transaction executes in.
type execCtx struct {
	now  int64 // latest block header timestamp (the parent block's), chain ms
	num  int64 // number of the block the transaction lands in
	p    ChainParams
	usdt tron.Address
	deep DeepReserve // the deep reserve's terms (deep.go)
	// feeLimit is the transaction's fee_limit (SUN), for smart-contract calls.
	feeLimit int64
	// validateOnly stops a contract that validatesInPlace after its checks, changing
	// nothing: building a transaction runs only the actuator's validate in java-tron
	// (Wallet.createTransactionCapsule).
	validateOnly bool
	// sigs is the transaction's signature count: more than one burns the multi-signature
	// fee (permission.go).
	sigs int
}

// validatesInPlace reports the contracts whose execution checks everything before it
// changes anything and honours execCtx.validateOnly, so that a build validates them on the
// pending state itself instead of a copy of every account and delegation.
func validatesInPlace(c tron.Contract) bool {
	switch c.(type) {
	case *tron.DelegateResourceContract, *tron.UnDelegateResourceContract, *tron.AccountPermissionUpdateContract:
		return true
	}
	return false
}

// execResult is what TransactionInfo reports about an executed transaction.
type execResult struct {
	ContractRet    string       `json:"contract_ret"` // SUCCESS, REVERT, OUT_OF_ENERGY
	Fee            int64        `json:"fee,omitempty"`
	EnergyUsage    int64        `json:"energy_usage,omitempty"` // from stake
	EnergyFee      int64        `json:"energy_fee,omitempty"`   // SUN burned for energy
	EnergyTotal    int64        `json:"energy_total,omitempty"`
	NetUsage       int64        `json:"net_usage,omitempty"`
	NetFee         int64        `json:"net_fee,omitempty"`
	Logs           []usdtLog    `json:"logs,omitempty"`
	ContractResult []byte       `json:"contract_result,omitempty"`
	Contract       tron.Address `json:"contract,omitzero"`
}

// usdtLog is a TRC-20 Transfer event.
type usdtLog struct {
	From   tron.Address `json:"from"`
	To     tron.Address `json:"to"`
	Amount int64        `json:"amount"`
}

func (r execResult) failed() bool { return r.ContractRet != "SUCCESS" }

// execute validates c against s exactly as far as java-tron's actuator does and, when
// valid, applies it. A *validateError leaves s untouched. netBytes is the transaction's
// bandwidth size, reported in the receipt (bandwidth is not charged).
func (s *state) execute(ctx execCtx, c tron.Contract, netBytes int64) (execResult, error) {
	owner := c.Owner()
	before, had := s.Accounts[owner]
	charged := false
	var net bandwidthCharge
	if _, call := c.(*tron.TriggerSmartContract); call && netBytes > 0 && !had {
		// BandwidthProcessor.consume looks the owner up before any actuator runs.
		return execResult{}, invalid("account [%s] does not exist", owner)
	}
	if netBytes > 0 && had {
		// BandwidthProcessor.consume runs before the contract is validated; a contract
		// that creates an account pays its creation instead (consumeForCreateNewAccount,
		// createaccount.go). Building a transaction (netBytes 0) only validates.
		var err error
		if s.createsAccount(c) {
			net, err = s.chargeCreateAccount(ctx, owner, netBytes)
		} else {
			net, err = s.chargeBandwidth(ctx, owner, netBytes)
		}
		if err != nil {
			return execResult{}, err
		}
		charged = true
	}
	multiSign, err := s.chargeMultiSign(owner, ctx.sigs) // Manager.consumeMultiSignFee, after bandwidth
	if err != nil {
		s.Accounts[owner] = before
		return execResult{}, err
	}
	res, err := s.executeContract(ctx, c, netBytes)
	if err != nil {
		if charged || multiSign > 0 {
			s.Accounts[owner] = before
		}
		return res, err
	}
	if charged {
		res.NetUsage, res.NetFee = net.fromStakeOrFree, net.burned
		res.Fee += net.burned
	}
	res.Fee += multiSign
	return res, nil
}

// bandwidthError is BandwidthProcessor's AccountResourceInsufficientException, which
// broadcast answers as BANDWITH_ERROR.
type bandwidthError struct{}

func (bandwidthError) Error() string { return "Account resource insufficient error." }

type bandwidthCharge struct{ fromStakeOrFree, burned int64 }

// createsAccount reports the contracts whose bandwidth java-tron charges through
// consumeForCreateNewAccount (createaccount.go).
func (s *state) createsAccount(c tron.Contract) bool {
	switch c := c.(type) {
	case *tron.AccountCreateContract:
		return true
	case *tron.TransferContract:
		_, exists := s.Accounts[c.ToAddress]
		return !exists
	}
	return false
}

// chargeBandwidth is BandwidthProcessor.consume in java-tron's order: the owner's staked
// bandwidth (useAccountNet), then the daily free allowance (useFreeNet), then TRX burned
// at TransactionFee per byte (useTransactionFee); else AccountResourceInsufficient.
// Usage recovers linearly over the 24 h window.
func (s *state) chargeBandwidth(ctx execCtx, owner tron.Address, bytes int64) (bandwidthCharge, error) {
	a := s.Accounts[owner]
	r := s.totals(ctx.p, ctx.num)
	used := usageAt(a.NetUsage, a.NetTime, ctx.now)
	if bytes <= netLimit(a, r)-used {
		a.NetUsage, a.NetTime = used+bytes, ctx.now
		s.Accounts[owner] = a
		return bandwidthCharge{fromStakeOrFree: bytes}, nil
	}
	freeUsed := usageAt(a.FreeNetUsage, a.FreeNetTime, ctx.now)
	if bytes <= ctx.p.FreeNetLimit-freeUsed {
		a.FreeNetUsage, a.FreeNetTime = freeUsed+bytes, ctx.now
		s.Accounts[owner] = a
		return bandwidthCharge{fromStakeOrFree: bytes}, nil
	}
	fee := bytes * ctx.p.TransactionFee
	if a.Balance >= fee {
		a.Balance -= fee
		s.Accounts[owner] = a
		return bandwidthCharge{burned: fee}, nil
	}
	return bandwidthCharge{}, bandwidthError{}
}

func (s *state) executeContract(ctx execCtx, c tron.Contract, netBytes int64) (execResult, error) {
	switch c := c.(type) {
	case *tron.TransferContract:
		return s.execTransfer(ctx, c, netBytes)
	case *tron.AccountCreateContract:
		return s.execCreateAccount(ctx, c, netBytes)
	case *tron.DelegateResourceContract:
		return s.execDelegate(ctx, c, netBytes)
	case *tron.UnDelegateResourceContract:
		return s.execUndelegate(ctx, c, netBytes)
	case *tron.TriggerSmartContract:
		return s.execTrigger(ctx, c, netBytes)
	case *tron.AccountPermissionUpdateContract:
		return s.execPermissionUpdate(ctx, c, netBytes)
	}
	return execResult{}, invalid("contract type %s is not supported by the simulator", c.Type())
}

func accountMissing(a tron.Address) error {
	return invalid("Account[%s] not exists", a.Hex())
}

func (s *state) execTransfer(ctx execCtx, c *tron.TransferContract, net int64) (execResult, error) {
	if c.OwnerAddress.IsZero() {
		return execResult{}, invalid("Invalid ownerAddress!")
	}
	if c.ToAddress.IsZero() {
		return execResult{}, invalid("Invalid toAddress!")
	}
	if c.OwnerAddress == c.ToAddress {
		return execResult{}, invalid("Cannot transfer TRX to yourself.")
	}
	owner, ok := s.Accounts[c.OwnerAddress]
	if !ok {
		return execResult{}, invalid("Validate TransferContract error, no OwnerAccount.")
	}
	if c.Amount <= 0 {
		return execResult{}, invalid("Amount must be greater than 0.")
	}
	to, exists := s.Accounts[c.ToAddress]
	var fee int64
	if !exists {
		// TransferActuator.validate adds the system-contract creation fee; the account's
		// creation bandwidth was charged before (execute, createaccount.go).
		fee = ctx.p.CreateNewAccountFeeInSystemContract
	} else if to.IsContract {
		return execResult{}, invalid("Cannot transfer TRX to a smartContract.")
	}
	if c.Amount > math.MaxInt64-fee || owner.Balance < c.Amount+fee {
		return execResult{}, invalid("Validate TransferContract error, balance is not sufficient.")
	}
	if exists && to.Balance > math.MaxInt64-c.Amount {
		return execResult{}, invalid("long overflow")
	}
	owner.Balance -= c.Amount + fee
	s.Accounts[c.OwnerAddress] = owner
	if !exists {
		to = account{CreateTime: ctx.now}
	}
	to.Balance += c.Amount
	s.Accounts[c.ToAddress] = to
	return execResult{ContractRet: "SUCCESS", Fee: fee, NetUsage: net}, nil
}

func (s *state) execCreateAccount(ctx execCtx, c *tron.AccountCreateContract, net int64) (execResult, error) {
	if c.OwnerAddress.IsZero() {
		return execResult{}, invalid("Invalid ownerAddress")
	}
	owner, ok := s.Accounts[c.OwnerAddress]
	if !ok {
		return execResult{}, accountMissing(c.OwnerAddress)
	}
	// CreateAccountActuator.validate: the system-contract fee only; the creation's
	// bandwidth was charged before (execute, createaccount.go).
	fee := ctx.p.CreateNewAccountFeeInSystemContract
	if owner.Balance < fee {
		return execResult{}, invalid("Validate CreateAccountActuator error, insufficient fee.")
	}
	if c.AccountAddress.IsZero() {
		return execResult{}, invalid("Invalid account address")
	}
	if _, ok := s.Accounts[c.AccountAddress]; ok {
		return execResult{}, invalid("Account has existed")
	}
	owner.Balance -= fee
	s.Accounts[c.OwnerAddress] = owner
	s.Accounts[c.AccountAddress] = account{CreateTime: ctx.now}
	return execResult{ContractRet: "SUCCESS", Fee: fee, NetUsage: net}, nil
}

// energyUsageSun converts an account's current energy usage into staked SUN, the part of
// its stake it cannot delegate (java-tron's v2 usage check).
func (s *state) energyUsageSun(ctx execCtx, a account) int64 {
	u := usageAt(a.EnergyUsage, a.EnergyTime, ctx.now)
	if u == 0 {
		return 0
	}
	r := s.totals(ctx.p, ctx.num)
	return min(a.FrozenEnergy, mulDiv(u*trxPrecision, r.TotalEnergyWeight, r.TotalEnergyLimit))
}

// canDelegate is getcandelegatedmaxsize: available stake minus what usage pins.
func (s *state) canDelegate(ctx execCtx, owner tron.Address, res tron.ResourceCode) int64 {
	a, ok := s.Accounts[owner]
	if !ok {
		return 0
	}
	if res == tron.Energy {
		return max(0, a.FrozenEnergy-s.energyUsageSun(ctx, a))
	}
	return max(0, a.FrozenBandwidth)
}

func (s *state) execDelegate(ctx execCtx, c *tron.DelegateResourceContract, net int64) (execResult, error) {
	if c.OwnerAddress.IsZero() {
		return execResult{}, invalid("Invalid address")
	}
	owner, ok := s.Accounts[c.OwnerAddress]
	if !ok {
		return execResult{}, accountMissing(c.OwnerAddress)
	}
	if c.Balance < trxPrecision {
		return execResult{}, invalid("delegateBalance must be greater than or equal to 1 TRX")
	}
	switch c.Resource {
	case tron.Bandwidth:
		if s.canDelegate(ctx, c.OwnerAddress, tron.Bandwidth) < c.Balance {
			return execResult{}, invalid("delegateBalance must be less than or equal to available FreezeBandwidthV2 balance")
		}
	case tron.Energy:
		if s.canDelegate(ctx, c.OwnerAddress, tron.Energy) < c.Balance {
			return execResult{}, invalid("delegateBalance must be less than or equal to available FreezeEnergyV2 balance")
		}
	default:
		return execResult{}, invalid("ResourceCode error, valid ResourceCode[BANDWIDTH、ENERGY]")
	}
	if c.ReceiverAddress.IsZero() {
		return execResult{}, invalid("Invalid receiverAddress")
	}
	if c.ReceiverAddress == c.OwnerAddress {
		return execResult{}, invalid("receiverAddress must not be the same as ownerAddress")
	}
	recv, ok := s.Accounts[c.ReceiverAddress]
	if !ok {
		return execResult{}, accountMissing(c.ReceiverAddress)
	}
	var lockPeriod int64
	if c.Lock {
		lockPeriod = c.LockPeriod
		if lockPeriod == 0 {
			lockPeriod = delegatePeriodBlocks
		}
		if lockPeriod < 0 || lockPeriod > ctx.p.MaxDelegateLockPeriod {
			return execResult{}, invalid("The lock period of delegate resource cannot be less than 0 and cannot exceed %d!", ctx.p.MaxDelegateLockPeriod)
		}
		if prev, ok := s.Delegations[delegKey{c.OwnerAddress, c.ReceiverAddress, true}]; ok {
			expire, name := prev.ExpireBandwidth, "BANDWIDTH"
			if c.Resource == tron.Energy {
				expire, name = prev.ExpireEnergy, "ENERGY"
			}
			if remain := expire - ctx.now; lockPeriod*BlockTimeMs < remain {
				return execResult{}, invalid("The lock period for %s this time cannot be less than the remaining time[%dms] of the last lock period for %s!", name, remain, name)
			}
		}
	}
	if recv.IsContract {
		return execResult{}, invalid("Do not allow delegate resources to contract addresses")
	}
	if ctx.validateOnly {
		return execResult{ContractRet: "SUCCESS"}, nil
	}

	s.unlockExpired(c.OwnerAddress, c.ReceiverAddress, ctx.now)
	k := delegKey{c.OwnerAddress, c.ReceiverAddress, c.Lock}
	d, ok := s.Delegations[k]
	if !ok {
		d = delegation{From: k.From, To: k.To, Lock: k.Lock}
	}
	var expire int64
	if c.Lock {
		expire = ctx.now + lockPeriod*BlockTimeMs
	}
	owner = s.Accounts[c.OwnerAddress]
	recv = s.Accounts[c.ReceiverAddress]
	if c.Resource == tron.Energy {
		d.Energy += c.Balance
		d.ExpireEnergy = expire
		owner.FrozenEnergy -= c.Balance
		owner.DelegatedOutEnergy += c.Balance
		recv.AcquiredEnergy += c.Balance
	} else {
		d.Bandwidth += c.Balance
		d.ExpireBandwidth = expire
		owner.FrozenBandwidth -= c.Balance
		owner.DelegatedOutBandwidth += c.Balance
		recv.AcquiredBandwidth += c.Balance
	}
	s.Delegations[k] = d
	s.Accounts[c.OwnerAddress] = owner
	s.Accounts[c.ReceiverAddress] = recv
	return execResult{ContractRet: "SUCCESS", NetUsage: net}, nil
}

// unlockExpired folds a locked record whose lock has run out into the unlocked record, as
// java-tron's DelegatedResourceStore.unLockExpireResource does before every change.
func (s *state) unlockExpired(from, to tron.Address, now int64) {
	lk := delegKey{from, to, true}
	locked, ok := s.Delegations[lk]
	if !ok {
		return
	}
	uk := delegKey{from, to, false}
	unlocked, had := s.Delegations[uk]
	if !had {
		unlocked = delegation{From: from, To: to}
	}
	moved := false
	// DelegatedResourceStore.unLockExpireResource: a lock ends once expire < now.
	if locked.Energy > 0 && locked.ExpireEnergy < now {
		unlocked.Energy += locked.Energy
		locked.Energy, locked.ExpireEnergy = 0, 0
		moved = true
	}
	if locked.Bandwidth > 0 && locked.ExpireBandwidth < now {
		unlocked.Bandwidth += locked.Bandwidth
		locked.Bandwidth, locked.ExpireBandwidth = 0, 0
		moved = true
	}
	if !moved {
		return
	}
	if locked.Energy == 0 && locked.Bandwidth == 0 {
		delete(s.Delegations, lk)
	} else {
		s.Delegations[lk] = locked
	}
	s.Delegations[uk] = unlocked
}

func (s *state) execUndelegate(ctx execCtx, c *tron.UnDelegateResourceContract, net int64) (execResult, error) {
	if c.OwnerAddress.IsZero() {
		return execResult{}, invalid("Invalid address")
	}
	owner, ok := s.Accounts[c.OwnerAddress]
	if !ok {
		return execResult{}, invalid("Account[%s] does not exist", c.OwnerAddress.Hex())
	}
	if c.ReceiverAddress.IsZero() {
		return execResult{}, invalid("Invalid receiverAddress")
	}
	if c.ReceiverAddress == c.OwnerAddress {
		return execResult{}, invalid("receiverAddress must not be the same as ownerAddress")
	}
	lk, uk := delegKey{c.OwnerAddress, c.ReceiverAddress, true}, delegKey{c.OwnerAddress, c.ReceiverAddress, false}
	locked, hasLocked := s.Delegations[lk]
	unlocked, hasUnlocked := s.Delegations[uk]
	if !hasLocked && !hasUnlocked {
		return execResult{}, invalid("delegated Resource does not exist")
	}
	if c.Balance <= 0 {
		return execResult{}, invalid("unDelegateBalance must be more than 0 TRX")
	}
	var avail int64
	switch c.Resource {
	case tron.Bandwidth:
		avail = unlocked.Bandwidth
		if hasLocked && locked.ExpireBandwidth < ctx.now { // UnDelegateResourceActuator: expire < now
			avail += locked.Bandwidth
		}
		if avail < c.Balance {
			return execResult{}, invalid("insufficient delegatedFrozenBalance(BANDWIDTH), request=%d, unlock_balance=%d", c.Balance, avail)
		}
	case tron.Energy:
		avail = unlocked.Energy
		if hasLocked && locked.ExpireEnergy < ctx.now {
			avail += locked.Energy
		}
		if avail < c.Balance {
			return execResult{}, invalid("insufficient delegateFrozenBalance(Energy), request=%d, unlock_balance=%d", c.Balance, avail)
		}
	default:
		return execResult{}, invalid("ResourceCode error.valid ResourceCode[BANDWIDTH、Energy]")
	}
	if ctx.validateOnly {
		return execResult{ContractRet: "SUCCESS"}, nil
	}

	s.unlockExpired(c.OwnerAddress, c.ReceiverAddress, ctx.now)
	unlocked = s.Delegations[uk]
	recv, recvExists := s.Accounts[c.ReceiverAddress]
	if c.Resource == tron.Energy {
		unlocked.Energy -= c.Balance
		owner.DelegatedOutEnergy -= c.Balance
		owner.FrozenEnergy += c.Balance
		recv.AcquiredEnergy = max(0, recv.AcquiredEnergy-c.Balance)
	} else {
		unlocked.Bandwidth -= c.Balance
		owner.DelegatedOutBandwidth -= c.Balance
		owner.FrozenBandwidth += c.Balance
		recv.AcquiredBandwidth = max(0, recv.AcquiredBandwidth-c.Balance)
	}
	if unlocked.Energy == 0 && unlocked.Bandwidth == 0 {
		delete(s.Delegations, uk)
	} else {
		s.Delegations[uk] = unlocked
	}
	s.Accounts[c.OwnerAddress] = owner
	if recvExists {
		s.Accounts[c.ReceiverAddress] = recv
	}
	return execResult{ContractRet: "SUCCESS", NetUsage: net}, nil
}

// usdtCall is a decoded call of the simulated TRC-20.
type usdtCall struct {
	sel    []byte
	to     tron.Address // transfer, balanceOf
	amount int64        // transfer
	tooBig bool         // amount does not fit int64 (always more than any balance)
}

func decodeUSDTCall(data []byte) (usdtCall, bool) {
	if len(data) < 4 {
		return usdtCall{}, false
	}
	c := usdtCall{sel: data[:4]}
	args := data[4:]
	word := func(i int) []byte {
		if len(args) < 32*(i+1) {
			return nil
		}
		return args[32*i : 32*(i+1)]
	}
	switch {
	case bytes.Equal(c.sel, selTransfer):
		w0, w1 := word(0), word(1)
		if w0 == nil || w1 == nil {
			return c, false
		}
		c.to, _ = tron.AddressFromBytes(w0[12:])
		if !allZero(w1[:24]) || w1[24]&0x80 != 0 {
			c.tooBig = true
		} else {
			var v int64
			for _, b := range w1[24:] {
				v = v<<8 | int64(b)
			}
			c.amount = v
		}
		return c, true
	case bytes.Equal(c.sel, selBalanceOf):
		w0 := word(0)
		if w0 == nil {
			return c, false
		}
		c.to, _ = tron.AddressFromBytes(w0[12:])
		return c, true
	case bytes.Equal(c.sel, selDecimals), bytes.Equal(c.sel, selSymbol),
		bytes.Equal(c.sel, selName), bytes.Equal(c.sel, selTotalSupply):
		return c, true
	}
	return c, false
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// transferEnergy is the energy a USDT transfer to `to` costs now.
func (s *state) transferEnergy(to tron.Address) int64 {
	if s.USDT[to] > 0 {
		return EnergyUSDTTransferToHolder
	}
	return EnergyUSDTTransferToNew
}

// constantCall runs a USDT call without changing anything (triggerconstantcontract). ok
// false means the call reverts.
func (s *state) constantCall(owner tron.Address, data []byte) (out []byte, energy int64, ok bool) {
	call, valid := decodeUSDTCall(data)
	if !valid {
		return nil, energyUSDTRevert, false
	}
	switch {
	case bytes.Equal(call.sel, selTransfer):
		if call.tooBig || call.amount < 0 || zeroAccount(call.to) || s.USDT[owner] < call.amount {
			return nil, energyUSDTRevert, false
		}
		return uint256(1), s.transferEnergy(call.to), true
	case bytes.Equal(call.sel, selBalanceOf):
		return uint256(s.USDT[call.to]), energyUSDTRead, true
	case bytes.Equal(call.sel, selDecimals):
		return uint256(6), energyUSDTRead, true
	case bytes.Equal(call.sel, selTotalSupply):
		var total int64
		for _, v := range s.USDT {
			total += v
		}
		return uint256(total), energyUSDTRead, true
	case bytes.Equal(call.sel, selSymbol):
		return abiString("USDT"), energyUSDTRead, true
	default: // name()
		return abiString("Tether USD"), energyUSDTRead, true
	}
}

func (s *state) execTrigger(ctx execCtx, c *tron.TriggerSmartContract, net int64) (execResult, error) {
	owner, ok := s.Accounts[c.OwnerAddress]
	if c.OwnerAddress.IsZero() || !ok {
		return execResult{}, invalid("Validate InternalTransfer error, no OwnerAccount.")
	}
	if c.ContractAddress == DeepReserveContract() {
		return s.execDeepRent(ctx, c, net)
	}
	if c.ContractAddress != ctx.usdt {
		return execResult{}, invalid("No contract or not a smart contract")
	}
	if c.CallValue < 0 || c.CallValue > owner.Balance {
		return execResult{}, invalid("validateForSmartContract failure, not enough balance")
	}
	if ctx.feeLimit < 0 || ctx.feeLimit > ctx.p.MaxFeeLimit {
		return execResult{}, invalid("feeLimit must be >= 0 and <= %d", ctx.p.MaxFeeLimit)
	}
	res := execResult{NetUsage: net, Contract: ctx.usdt}
	call, valid := decodeUSDTCall(c.Data)
	need := int64(energyUSDTRevert)
	revert := !valid || c.CallValue != 0 || !bytes.Equal(call.sel, selTransfer) ||
		call.tooBig || call.amount < 0 || zeroAccount(call.to) || s.USDT[c.OwnerAddress] < call.amount
	if !revert {
		need = s.transferEnergy(call.to)
	}
	feeLimit := ctx.feeLimit
	r := s.totals(ctx.p, ctx.num)
	used := usageAt(owner.EnergyUsage, owner.EnergyTime, ctx.now)
	stake := max(0, energyLimit(owner, r)-used)
	fromStake := min(stake, need)
	burnNeeded := (need - fromStake) * ctx.p.EnergyFee
	payable := min(owner.Balance, feeLimit)
	if burnNeeded > payable {
		// OUT_OF_ENERGY: the stake part and everything the fee limit allows are consumed.
		res.ContractRet = "OUT_OF_ENERGY"
		res.EnergyUsage = fromStake
		res.EnergyFee = payable / ctx.p.EnergyFee * ctx.p.EnergyFee
		res.EnergyTotal = fromStake + payable/ctx.p.EnergyFee
	} else {
		res.EnergyUsage = fromStake
		res.EnergyFee = burnNeeded
		res.EnergyTotal = need
		if revert {
			res.ContractRet = "REVERT"
		} else {
			res.ContractRet = "SUCCESS"
			res.ContractResult = uint256(1)
			res.Logs = []usdtLog{{From: c.OwnerAddress, To: call.to, Amount: call.amount}}
			s.USDT[c.OwnerAddress] -= call.amount
			if s.USDT[c.OwnerAddress] == 0 {
				delete(s.USDT, c.OwnerAddress)
			}
			s.USDT[call.to] += call.amount
		}
	}
	res.Fee = res.EnergyFee
	owner.Balance -= res.EnergyFee
	owner.EnergyUsage = used + res.EnergyUsage
	owner.EnergyTime = ctx.now
	s.Accounts[c.OwnerAddress] = owner
	return res, nil
}

func uint256(v int64) []byte {
	b := make([]byte, 32)
	for i := 31; i >= 24; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return b
}

func abiString(s string) []byte {
	out := make([]byte, 0, 96)
	out = append(out, uint256(32)...)
	out = append(out, uint256(int64(len(s)))...)
	word := make([]byte, (len(s)+31)/32*32)
	copy(word, s)
	return append(out, word...)
}

// logJSON renders a Transfer log as java-tron prints it with visible=false: address is
// the contract's 20 bytes, topics are 32-byte words without the 0x41 prefix.
func logJSON(contract tron.Address, l usdtLog, visible bool) tron.Log {
	addr := hex.EncodeToString(contract[1:])
	if visible {
		addr = contract.String()
	}
	return tron.Log{
		Address: addr,
		Topics: []string{
			hex.EncodeToString(TransferTopic),
			hex.EncodeToString(append(make([]byte, 12), l.From[1:]...)),
			hex.EncodeToString(append(make([]byte, 12), l.To[1:]...)),
		},
		Data: hex.EncodeToString(uint256(l.Amount)),
	}
}

// zeroAccount reports the zero address as a contract sees it (20 zero bytes, whatever the
// 0x41 prefix): the token's transfer requires a recipient other than it and reverts.
func zeroAccount(a tron.Address) bool { return a.IsZero() || allZero(a[1:]) }
