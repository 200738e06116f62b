package tronsim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rental/infra/tron"
)

func TestBlocksAreChainedByParentHash(t *testing.T) {
	h := newHarness(t, Options{})
	if got := h.mine(30); got != 30 {
		t.Fatalf("head after mining 30 = %d", got)
	}
	var list tron.BlockList
	h.wallet("/wallet/getblockbylimitnext", tron.BlockLimitRequest{StartNum: 0, EndNum: 31}, &list)
	if len(list.Block) != 31 {
		t.Fatalf("got %d blocks, want 31", len(list.Block))
	}
	for i, b := range list.Block {
		id, err := hex.DecodeString(b.BlockID)
		if err != nil || len(id) != 32 {
			t.Fatalf("block %d id %q", i, b.BlockID)
		}
		if got := int64(binary.BigEndian.Uint64(id[:8])); got != int64(i) || b.Number() != int64(i) {
			t.Fatalf("block %d: id prefix %d, number %d", i, got, b.Number())
		}
		if want := testGenesis.UnixMilli() + int64(i)*3000; b.Timestamp() != want {
			t.Fatalf("block %d timestamp %d, want %d (3 s of chain time per block)", i, b.Timestamp(), want)
		}
		if i > 0 && b.ParentHash() != list.Block[i-1].BlockID {
			t.Fatalf("block %d parentHash %s, want %s", i, b.ParentHash(), list.Block[i-1].BlockID)
		}
	}

	var now tron.Block
	h.wallet("/wallet/getnowblock", nil, &now)
	if now.BlockID != list.Block[30].BlockID {
		t.Fatalf("getnowblock %s, want head %s", now.BlockID, list.Block[30].BlockID)
	}
	var solid tron.Block
	h.wallet("/walletsolidity/getnowblock", nil, &solid)
	if solid.Number() != 30-19 {
		t.Fatalf("solid head %d, want %d", solid.Number(), 30-19)
	}
	var beyond map[string]any
	h.wallet("/walletsolidity/getblockbynum", tron.NumRequest{Num: 20}, &beyond)
	if len(beyond) != 0 {
		t.Fatalf("walletsolidity served block 20 above the solid head: %v", beyond)
	}

	// GET with query parameters, as java-tron's servlets allow.
	var byGet tron.Block
	if st := h.do(http.MethodGet, "/wallet/getblockbynum?num=7", nil, &byGet); st != 200 || byGet.BlockID != list.Block[7].BlockID {
		t.Fatalf("GET getblockbynum: status %d id %s", st, byGet.BlockID)
	}
	// More than 100 blocks per call is refused like java-tron ({}).
	var tooMany map[string]any
	h.wallet("/wallet/getblockbylimitnext", tron.BlockLimitRequest{StartNum: 0, EndNum: 101}, &tooMany)
	if len(tooMany) != 0 {
		t.Fatalf("range of 101 blocks answered %v, want {}", tooMany)
	}
}

func TestTRXTransferActivatesAddress(t *testing.T) {
	h := newHarness(t, Options{})
	to := newKey(t).Address()
	var acc map[string]any
	h.wallet("/wallet/getaccount", tron.AddressRequest{Address: to.String(), Visible: true}, &acc)
	if len(acc) != 0 {
		t.Fatalf("unknown address answered %v, want {}", acc)
	}
	faucetBefore := h.account(h.sim.FaucetAddress()).BalanceSun

	var tx struct{ TxID string }
	h.ctl("/sim/trx/transfer", map[string]any{"to": to.String(), "amount_sun": 5 * trx}, &tx)
	if len(tx.TxID) != 64 {
		t.Fatalf("txid %q", tx.TxID)
	}
	if h.account(to).Activated {
		t.Fatal("address activated before the transfer was in a block")
	}
	num := h.mine(1)

	var got tron.Account
	h.wallet("/wallet/getaccount", tron.AddressRequest{Address: to.Hex()}, &got)
	if got.Address != to.Hex() || got.Balance != 5*trx {
		t.Fatalf("account %+v, want address %s balance %d", got, to.Hex(), 5*trx)
	}
	if want := testGenesis.UnixMilli() + (num-1)*3000; got.CreateTime != want {
		t.Fatalf("create_time %d, want the parent block time %d", got.CreateTime, want)
	}
	fee := int64(1_100_000) // 1 TRX system-contract fee + 0.1 TRX account-creation bandwidth
	if after := h.account(h.sim.FaucetAddress()).BalanceSun; faucetBefore-after != 5*trx+fee {
		t.Fatalf("faucet paid %d, want %d", faucetBefore-after, 5*trx+fee)
	}
	info := h.info(tx.TxID)
	if info.BlockNumber != num || info.Fee != fee {
		t.Fatalf("info %+v, want block %d fee %d", info, num, fee)
	}
	var txByID tron.Transaction
	h.wallet("/wallet/gettransactionbyid", tron.ValueRequest{Value: tx.TxID}, &txByID)
	if !txByID.Succeeded() || txByID.TxID != tx.TxID {
		t.Fatalf("gettransactionbyid %+v", txByID)
	}
	r, err := tron.ParseRawDataJSON(txByID.RawData)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := r.Contract.(*tron.TransferContract); !ok || c.ToAddress != to || c.Amount != 5*trx {
		t.Fatalf("contract %#v", r.Contract)
	}
}

func TestUSDTTransferEmitsTransferLog(t *testing.T) {
	h := newHarness(t, Options{})
	faucet := h.sim.FaucetAddress()
	usdt := h.sim.USDTContract()
	to := newKey(t).Address()

	estimate := func(owner, to tron.Address, amount int64) tron.TransactionExtention {
		var ext tron.TransactionExtention
		param := hex.EncodeToString(append(make([]byte, 12), to[1:]...)) + hex.EncodeToString(uint256(amount))
		h.wallet("/wallet/triggerconstantcontract", tron.TriggerSmartContractRequest{
			OwnerAddress: owner.String(), ContractAddress: usdt.String(), Visible: true,
			FunctionSelector: "transfer(address,uint256)", Parameter: param}, &ext)
		return ext
	}
	if e := estimate(faucet, to, 1); e.EnergyUsed != EnergyUSDTTransferToNew {
		t.Fatalf("energy to a first-time holder %d, want %d", e.EnergyUsed, EnergyUSDTTransferToNew)
	}

	var tx struct{ TxID string }
	h.ctl("/sim/usdt/transfer", map[string]any{"to": to.String(), "amount": 12_345_678}, &tx)
	num := h.mine(1)

	info := h.info(tx.TxID)
	if info.BlockNumber != num || info.Failed() || info.Receipt.Result != "SUCCESS" {
		t.Fatalf("info %+v", info)
	}
	if info.Receipt.EnergyUsageTotal != EnergyUSDTTransferToNew || info.Fee != EnergyUSDTTransferToNew*100 {
		t.Fatalf("receipt %+v fee %d: the faucet has no stake and burns 100 SUN per energy", info.Receipt, info.Fee)
	}
	if len(info.Log) != 1 {
		t.Fatalf("logs %+v", info.Log)
	}
	l := info.Log[0]
	want := []string{
		"ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef",
		"000000000000000000000000" + faucet.Hex()[2:],
		"000000000000000000000000" + to.Hex()[2:],
	}
	if l.Address != usdt.Hex()[2:] || len(l.Topics) != 3 || l.Topics[0] != want[0] || l.Topics[1] != want[1] || l.Topics[2] != want[2] {
		t.Fatalf("log %+v, want address %s topics %v", l, usdt.Hex()[2:], want)
	}
	if l.Data != hex.EncodeToString(uint256(12_345_678)) {
		t.Fatalf("log data %s", l.Data)
	}
	var byBlock []tron.TransactionInfo
	h.wallet("/wallet/gettransactioninfobyblocknum", tron.NumRequest{Num: num}, &byBlock)
	if len(byBlock) != 1 || byBlock[0].ID != tx.TxID || len(byBlock[0].Log) != 1 {
		t.Fatalf("gettransactioninfobyblocknum %+v", byBlock)
	}

	// balanceOf through triggerconstantcontract, and the cheaper transfer to a holder.
	var bal tron.TransactionExtention
	h.wallet("/wallet/triggerconstantcontract", tron.TriggerSmartContractRequest{
		OwnerAddress: faucet.Hex(), ContractAddress: usdt.Hex(), FunctionSelector: "balanceOf(address)",
		Parameter: hex.EncodeToString(append(make([]byte, 12), to[1:]...))}, &bal)
	if len(bal.ConstantResult) != 1 || bal.ConstantResult[0] != hex.EncodeToString(uint256(12_345_678)) {
		t.Fatalf("balanceOf %+v", bal)
	}
	if e := estimate(faucet, to, 1); e.EnergyUsed != EnergyUSDTTransferToHolder {
		t.Fatalf("energy to a holder %d, want %d", e.EnergyUsed, EnergyUSDTTransferToHolder)
	}

	// The real path: triggersmartcontract, sign with the holder's key, broadcast.
	holder := newKey(t)
	h.seed(GenesisAccount{Address: holder.Address(), BalanceSun: 50 * trx, USDT: 1_000_000})
	param := hex.EncodeToString(append(make([]byte, 12), to[1:]...)) + hex.EncodeToString(uint256(400_000))
	var ext tron.TransactionExtention
	h.wallet("/wallet/triggersmartcontract", tron.TriggerSmartContractRequest{
		OwnerAddress: holder.Address().String(), ContractAddress: usdt.String(), Visible: true,
		FunctionSelector: "transfer(address,uint256)", Parameter: param, FeeLimit: 30 * trx}, &ext)
	if !ext.Result.Result || ext.Transaction == nil {
		t.Fatalf("triggersmartcontract %+v", ext)
	}
	if err := tron.SignTransaction(ext.Transaction, holder); err != nil {
		t.Fatal(err)
	}
	if r := h.broadcast(ext.Transaction); !r.Result {
		t.Fatalf("broadcast %+v (%s)", r, hexText(r.Message))
	}
	h.mine(1)
	info = h.info(ext.Transaction.TxID)
	if info.Failed() || len(info.Log) != 1 || info.Log[0].Topics[1] != "000000000000000000000000"+holder.Address().Hex()[2:] {
		t.Fatalf("holder transfer info %+v", info)
	}
	if got := h.account(to).USDT; got != 12_345_678+400_000 {
		t.Fatalf("receiver USDT %d", got)
	}
	if got := h.account(holder.Address()); got.USDT != 600_000 || got.BalanceSun != 50*trx-EnergyUSDTTransferToHolder*100 {
		t.Fatalf("holder after transfer: usdt %d balance %d", got.USDT, got.BalanceSun)
	}
}

// delegationSetup seeds a staked pool and an activated receiver.
func delegationSetup(t *testing.T, h *harness) (pool tron.PrivateKey, recv tron.Address) {
	pool = newKey(t)
	recv = newKey(t).Address()
	h.seed(GenesisAccount{Address: pool.Address(), BalanceSun: 100 * trx, StakeEnergySun: 10_000 * trx})
	h.seed(GenesisAccount{Address: recv, BalanceSun: 1 * trx})
	return pool, recv
}

func TestDelegateAndUndelegate(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)

	var maxSize tron.CanDelegatedMaxSize
	h.wallet("/wallet/getcandelegatedmaxsize", tron.CanDelegatedMaxSizeRequest{OwnerAddress: pool.Address().String(), Type: 1, Visible: true}, &maxSize)
	if maxSize.MaxSize != 10_000*trx {
		t.Fatalf("max_size %d", maxSize.MaxSize)
	}
	// More than the stake is refused when building, as java-tron does.
	errText := h.walletError("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(),
		ReceiverAddress: recv.String(), Balance: 10_001 * trx, Resource: "ENERGY", Visible: true})
	wantContains(t, errText, "ContractValidateException : delegateBalance must be less than or equal to available FreezeEnergyV2 balance")

	tx := h.signed("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(),
		ReceiverAddress: recv.String(), Balance: 4_000 * trx, Resource: "ENERGY", Lock: true, LockPeriod: 20, Visible: true}, pool)
	if r := h.broadcast(tx); !r.Result || r.TxID != tx.TxID {
		t.Fatalf("broadcast %+v (%s)", r, hexText(r.Message))
	}
	var none map[string]any
	h.wallet("/wallet/getdelegatedresourcev2", tron.DelegatedResourceRequest{FromAddress: pool.Address().String(), ToAddress: recv.String(), Visible: true}, &none)
	if len(none) != 0 {
		t.Fatalf("delegation visible before its block: %v", none)
	}
	num := h.mine(1)
	if info := h.info(tx.TxID); info.BlockNumber != num {
		t.Fatalf("delegation not in block %d: %+v", num, info)
	}

	var dl tron.DelegatedResourceList
	h.wallet("/wallet/getdelegatedresourcev2", tron.DelegatedResourceRequest{FromAddress: pool.Address().Hex(), ToAddress: recv.Hex()}, &dl)
	wantExpire := testGenesis.UnixMilli() + (num-1)*3000 + 20*3000
	if len(dl.DelegatedResource) != 1 || dl.DelegatedResource[0].FrozenBalanceForEnergy != 4_000*trx ||
		dl.DelegatedResource[0].ExpireTimeForEnergy != wantExpire || dl.DelegatedResource[0].From != pool.Address().Hex() {
		t.Fatalf("delegations %+v, want 4000 TRX expiring at %d", dl, wantExpire)
	}
	var res tron.AccountResource
	h.wallet("/wallet/getaccountresource", tron.AddressRequest{Address: recv.String(), Visible: true}, &res)
	if res.TotalEnergyLimit != 180_000_000_000 || res.TotalEnergyWeight <= 0 {
		t.Fatalf("totals %+v", res)
	}
	if want := 4_000 * res.TotalEnergyLimit / res.TotalEnergyWeight; res.EnergyLimit != want || want == 0 {
		t.Fatalf("receiver EnergyLimit %d, want %d", res.EnergyLimit, want)
	}
	h.wallet("/wallet/getcandelegatedmaxsize", tron.CanDelegatedMaxSizeRequest{OwnerAddress: pool.Address().String(), Type: 1, Visible: true}, &maxSize)
	if maxSize.MaxSize != 6_000*trx {
		t.Fatalf("max_size after delegating %d, want %d", maxSize.MaxSize, 6_000*trx)
	}
	var poolAcc tron.Account
	h.wallet("/wallet/getaccount", tron.AddressRequest{Address: pool.Address().String(), Visible: true}, &poolAcc)
	if poolAcc.FrozenV2Amount(tron.ResourceEnergy) != 6_000*trx || poolAcc.AccountResource.DelegatedFrozenV2BalanceForEnergy != 4_000*trx {
		t.Fatalf("pool account %+v", poolAcc)
	}

	// Locked: undelegating before the lock runs out is refused.
	undelegate := tron.UnDelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 4_000 * trx, Resource: "ENERGY", Visible: true}
	wantContains(t, h.walletError("/wallet/undelegateresource", undelegate), "insufficient delegateFrozenBalance(Energy)")
	h.mine(20)
	utx := h.signed("/wallet/undelegateresource", undelegate, pool)
	if r := h.broadcast(utx); !r.Result {
		t.Fatalf("undelegate broadcast %+v (%s)", r, hexText(r.Message))
	}
	h.mine(1)
	if info := h.info(utx.TxID); info.BlockNumber == 0 {
		t.Fatalf("undelegation did not land: %+v", info)
	}
	// Decode into fresh values: java-tron omits zero fields, so a reused struct would keep
	// the old numbers.
	var resAfter tron.AccountResource
	h.wallet("/wallet/getaccountresource", tron.AddressRequest{Address: recv.String(), Visible: true}, &resAfter)
	if resAfter.EnergyLimit != 0 || resAfter.TotalEnergyLimit == 0 {
		t.Fatalf("receiver resources after undelegate %+v", resAfter)
	}
	var maxAfter tron.CanDelegatedMaxSize
	h.wallet("/wallet/getcandelegatedmaxsize", tron.CanDelegatedMaxSizeRequest{OwnerAddress: pool.Address().String(), Type: 1, Visible: true}, &maxAfter)
	if maxAfter.MaxSize != 10_000*trx {
		t.Fatalf("max_size after undelegate %d", maxAfter.MaxSize)
	}
	if v := h.account(pool.Address()); len(v.DelegationsOut) != 0 || v.StakeEnergySun != 10_000*trx {
		t.Fatalf("pool view %+v", v)
	}
}

// Building a delegation or an undelegation validates it and changes nothing, as
// java-tron's createTransactionCapsule runs only the actuator's validate: the same build
// may be asked again, and nothing moves until a signed transaction lands.
func TestBuildingChangesNothing(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	all := tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 10_000 * trx, Resource: "ENERGY", Visible: true}
	for range 3 {
		h.wallet("/wallet/delegateresource", all, nil)
	}
	var maxSize tron.CanDelegatedMaxSize
	h.wallet("/wallet/getcandelegatedmaxsize", tron.CanDelegatedMaxSizeRequest{OwnerAddress: pool.Address().String(), Type: 1, Visible: true}, &maxSize)
	if maxSize.MaxSize != 10_000*trx {
		t.Fatalf("max_size after three builds %d, want the whole stake", maxSize.MaxSize)
	}
	if v := h.account(pool.Address()); len(v.DelegationsOut) != 0 {
		t.Fatalf("a build delegated: %+v", v.DelegationsOut)
	}

	part := all
	part.Balance = 4_000 * trx
	tx := h.signed("/wallet/delegateresource", part, pool)
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("broadcast %+v (%s)", r, hexText(r.Message))
	}
	h.mine(1)
	undelegate := tron.UnDelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 4_000 * trx, Resource: "ENERGY", Visible: true}
	for range 3 {
		h.wallet("/wallet/undelegateresource", undelegate, nil)
	}
	if v := h.account(pool.Address()); len(v.DelegationsOut) != 1 {
		t.Fatalf("delegations after three undelegation builds %+v, want the one landed", v.DelegationsOut)
	}
	h.wallet("/wallet/getcandelegatedmaxsize", tron.CanDelegatedMaxSizeRequest{OwnerAddress: pool.Address().String(), Type: 1, Visible: true}, &maxSize)
	if maxSize.MaxSize != 6_000*trx {
		t.Fatalf("max_size %d, want %d", maxSize.MaxSize, 6_000*trx)
	}
	// A build that would be refused still is, by the same checks.
	too := undelegate
	too.Balance = 4_001 * trx
	wantContains(t, h.walletError("/wallet/undelegateresource", too), "insufficient delegateFrozenBalance(Energy)")
}

func TestLockPeriodAboveNetworkCapIsRejected(t *testing.T) {
	h := newHarness(t, nileOpts())
	pool, recv := delegationSetup(t, h)
	req := tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 100 * trx, Resource: "ENERGY", Lock: true, LockPeriod: 144_001, Visible: true}
	wantContains(t, h.walletError("/wallet/delegateresource", req), "cannot exceed 144000!")
	req.LockPeriod = 144_000
	h.wallet("/wallet/delegateresource", req, nil)

	var params tron.ChainParameters
	h.wallet("/wallet/getchainparameters", nil, &params)
	for key, want := range map[string]int64{"getMaxDelegateLockPeriod": 144_000, "getEnergyFee": 100, "getTotalEnergyLimit": 180_000_000_000} {
		if got, ok := params.Get(key); !ok || got != want {
			t.Fatalf("%s = %d (listed %v), want %d", key, got, ok, want)
		}
	}
}

func TestBroadcastRejections(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	req := tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 100 * trx, Resource: "ENERGY", Visible: true}

	// Signed by someone else: SIGERROR.
	var tx tron.Transaction
	h.wallet("/wallet/delegateresource", req, &tx)
	raw, _ := hex.DecodeString(tx.RawDataHex)
	sum := sha256.Sum256(raw)
	sig, _ := newKey(t).SignHash(sum[:])
	tx.Signature = []string{hex.EncodeToString(sig)}
	r := h.broadcast(&tx)
	if r.Result || r.Code != "SIGERROR" {
		t.Fatalf("foreign signature: %+v", r)
	}
	wantContains(t, hexText(r.Message), "Validate signature error")

	// Correctly signed: accepted; again: DUP_TRANSACTION_ERROR.
	good := h.signed("/wallet/delegateresource", req, pool)
	if r := h.broadcast(good); !r.Result {
		t.Fatalf("good broadcast %+v", r)
	}
	if r := h.broadcast(good); r.Result || r.Code != "DUP_TRANSACTION_ERROR" {
		t.Fatalf("duplicate broadcast %+v", r)
	}
	h.mine(1)
	if r := h.broadcast(good); r.Result || r.Code != "DUP_TRANSACTION_ERROR" {
		t.Fatalf("duplicate of an included tx %+v", r)
	}

	// Expired in chain time: built now, broadcast after 21 blocks (63 s > 60 s).
	late := h.signed("/wallet/delegateresource", req, pool)
	h.mine(21)
	if r := h.broadcast(late); r.Result || r.Code != "TRANSACTION_EXPIRATION_ERROR" {
		t.Fatalf("expired broadcast %+v", r)
	}

	// Valid signature, invalid contract (more than the stake): CONTRACT_VALIDATE_ERROR.
	req.Balance = 9_000 * trx
	big := h.signed("/wallet/delegateresource", req, pool)
	h.seed(GenesisAccount{Address: pool.Address(), BalanceSun: 100 * trx, StakeEnergySun: 1_000 * trx})
	r = h.broadcast(big)
	if r.Result || r.Code != "CONTRACT_VALIDATE_ERROR" {
		t.Fatalf("over-stake broadcast %+v", r)
	}
	wantContains(t, hexText(r.Message), "Contract validate error : delegateBalance must be less than or equal to available FreezeEnergyV2 balance")
}

func TestFaults(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	delegate := func(bal int64) *tron.Transaction {
		return h.signed("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(),
			ReceiverAddress: recv.String(), Balance: bal, Resource: "ENERGY", Visible: true}, pool)
	}

	t.Run("reject_delegation", func(t *testing.T) {
		h.ctl("/sim/faults", map[string]any{"kind": "reject_delegation", "count": 1}, nil)
		r := h.broadcast(delegate(10 * trx))
		if r.Result || r.Code != "CONTRACT_VALIDATE_ERROR" {
			t.Fatalf("first delegation under the fault: %+v", r)
		}
		tx := delegate(11 * trx)
		if r := h.broadcast(tx); !r.Result {
			t.Fatalf("second delegation: %+v", r)
		}
		h.mine(1)
		if info := h.info(tx.TxID); info.BlockNumber == 0 {
			t.Fatal("delegation after the fault ran out did not land")
		}
	})

	t.Run("drop_tx", func(t *testing.T) {
		before := h.account(recv).AcquiredEnergySun
		h.ctl("/sim/faults", map[string]any{"kind": "drop_tx", "count": 1}, nil)
		tx := delegate(12 * trx)
		if r := h.broadcast(tx); !r.Result {
			t.Fatalf("dropped tx must still be answered result:true, got %+v", r)
		}
		h.mine(3)
		var info map[string]any
		h.wallet("/wallet/gettransactioninfobyid", tron.ValueRequest{Value: tx.TxID}, &info)
		if len(info) != 0 || h.account(recv).AcquiredEnergySun != before {
			t.Fatalf("dropped tx landed: %v", info)
		}
	})

	t.Run("node_down", func(t *testing.T) {
		h.ctl("/sim/faults", map[string]any{"kind": "node_down", "count": 2}, nil)
		for i := range 2 {
			if st := h.do(http.MethodPost, "/wallet/getnowblock", nil, nil); st != http.StatusServiceUnavailable {
				t.Fatalf("call %d under node_down: status %d", i, st)
			}
		}
		if st := h.do(http.MethodGet, "/sim/head", nil, nil); st != http.StatusOK {
			t.Fatalf("control API affected by node_down: %d", st)
		}
		if st := h.do(http.MethodPost, "/wallet/getnowblock", nil, nil); st != http.StatusOK {
			t.Fatalf("third call: status %d, node_down should have counted down", st)
		}
		var f Faults
		h.do(http.MethodGet, "/sim/faults", nil, &f)
		if f.NodeDown != 0 {
			t.Fatalf("faults %+v", f)
		}
	})

	t.Run("slow_confirm", func(t *testing.T) {
		h.ctl("/sim/faults", map[string]any{"kind": "slow_confirm", "count": 1, "blocks": 3}, nil)
		start := h.head().Number
		slow := delegate(13 * trx)
		if r := h.broadcast(slow); !r.Result {
			t.Fatalf("slow tx %+v", r)
		}
		fast := delegate(14 * trx)
		h.broadcast(fast)
		h.mine(1)
		if info := h.info(fast.TxID); info.BlockNumber != start+1 {
			t.Fatalf("unaffected tx in block %d, want %d", info.BlockNumber, start+1)
		}
		h.mine(2)
		var info map[string]any
		h.wallet("/wallet/gettransactioninfobyid", tron.ValueRequest{Value: slow.TxID}, &info)
		if len(info) != 0 {
			t.Fatalf("slow tx included too early: %v", info)
		}
		h.mine(1)
		if got := h.info(slow.TxID).BlockNumber; got != start+4 {
			t.Fatalf("slow tx in block %d, want %d (3 extra blocks)", got, start+4)
		}
	})

	if st := h.do(http.MethodPost, "/sim/faults", map[string]any{"kind": "bogus", "count": 1}, nil); st != http.StatusBadRequest {
		t.Fatalf("unknown fault kind: status %d, want 400", st)
	}
}

func TestForkReplacesBlocksAndKeepsChainLinked(t *testing.T) {
	h := newHarness(t, Options{})
	to := newKey(t).Address()
	h.mine(3)
	var tx struct{ TxID string }
	h.ctl("/sim/trx/transfer", map[string]any{"to": to.String(), "amount_sun": 7 * trx}, &tx)
	txBlock := h.mine(1)
	head := h.mine(2)

	var before tron.BlockList
	h.wallet("/wallet/getblockbylimitnext", tron.BlockLimitRequest{StartNum: 0, EndNum: head + 1}, &before)

	var res ForkResult
	h.ctl("/sim/fork", map[string]int{"depth": 3}, &res)
	if len(res.Orphaned) != 3 || len(res.ReIncluded) != 1 || res.ReIncluded[0] != tx.TxID || res.Head != head+1 {
		t.Fatalf("fork result %+v", res)
	}

	var after tron.BlockList
	h.wallet("/wallet/getblockbylimitnext", tron.BlockLimitRequest{StartNum: 0, EndNum: res.Head + 1}, &after)
	if int64(len(after.Block)) != res.Head+1 {
		t.Fatalf("%d blocks after fork", len(after.Block))
	}
	for i := range after.Block {
		b := after.Block[i]
		if i > 0 && b.ParentHash() != after.Block[i-1].BlockID {
			t.Fatalf("block %d not linked after fork", i)
		}
		if int64(i) <= head-3 && b.BlockID != before.Block[i].BlockID {
			t.Fatalf("block %d below the fork changed", i)
		}
		if int64(i) > head-3 && int64(i) <= head && b.BlockID == before.Block[i].BlockID {
			t.Fatalf("block %d in the forked range kept its id", i)
		}
	}
	info := h.info(tx.TxID)
	if info.BlockNumber != res.Head || info.BlockNumber <= txBlock {
		t.Fatalf("re-included tx at block %d, want %d (later than %d)", info.BlockNumber, res.Head, txBlock)
	}
	if got := h.account(to).BalanceSun; got != 7*trx {
		t.Fatalf("balance after fork %d: the re-included transfer must apply once", got)
	}
	if _, ok := h.sim.Account(to); !ok {
		t.Fatal("account lost by the fork")
	}
}

func TestStateSurvivesReopenWithoutClose(t *testing.T) {
	file := filepath.Join(t.TempDir(), "chain.json")
	opts := Options{DataFile: file, GenesisTime: testGenesis}
	s1, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	pool, recv := newKey(t), newKey(t).Address()
	if err := s1.SeedAccount(GenesisAccount{Address: pool.Address(), BalanceSun: 10 * trx, StakeEnergySun: 500 * trx}); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.TransferTRX(recv, 3*trx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Mine(5); err != nil {
		t.Fatal(err)
	}
	pendingTx, err := s1.TransferUSDT(recv, 99, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	head1 := s1.Head()
	view1, _ := s1.Account(recv)
	// Garbage past the recorded length, as a crash in the middle of an append leaves.
	logFile := file + ".blocks.0"
	f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"n":6,"id":"tr`)
	f.Close()
	// No Close: s1 is abandoned like a SIGKILLed process.

	s2, err := New(opts)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	if got := s2.Head(); got != head1 {
		t.Fatalf("head after reopen %+v, want %+v", got, head1)
	}
	if view2, _ := s2.Account(recv); view2.BalanceSun != view1.BalanceSun || !view2.Activated || view2.CreateTime != view1.CreateTime {
		t.Fatalf("account after reopen %+v, want %+v", view2, view1)
	}
	if p, _ := s2.Account(pool.Address()); p.StakeEnergySun != 500*trx {
		t.Fatalf("pool stake after reopen %d", p.StakeEnergySun)
	}
	// The transaction accepted before the crash still lands.
	if _, err := s2.Mine(1); err != nil {
		t.Fatal(err)
	}
	if v, _ := s2.Account(recv); v.USDT != 99 {
		t.Fatalf("pending USDT transfer %s lost: usdt %d", pendingTx, v.USDT)
	}
	// A fork switches the log generation; the next reopen sees the new branch.
	fr, err := s2.Fork(2)
	if err != nil {
		t.Fatal(err)
	}
	forkHead := s2.Head()
	s3, err := New(opts)
	if err != nil {
		t.Fatalf("reopen after fork: %v", err)
	}
	defer s3.Close()
	if got := s3.Head(); got != forkHead || got.Number != fr.Head {
		t.Fatalf("head after fork+reopen %+v, want %+v", got, forkHead)
	}
}

func TestRunProducesBlocksOnInterval(t *testing.T) {
	sim, err := New(Options{BlockInterval: 10 * time.Millisecond, GenesisTime: testGenesis})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for sim.Head().Number < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("head still %d after 5 s with a 10 ms interval", sim.Head().Number)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
}

func TestMulDivDoesNotOverflow(t *testing.T) {
	// 9e15 SUN-sized weights times the mainnet energy limit overflow int64 in the product.
	if got, want := mulDiv(9_000_000_000_000_000, 180_000_000_000, 19_000_000_000), int64(85_263_157_894_736_842); got != want {
		t.Fatalf("mulDiv = %d, want %d", got, want)
	}
	if got := mulDiv(4_000, 180_000_000_000, 19_000_000_000); got != 37_894 {
		t.Fatalf("mulDiv small = %d", got)
	}
}

func TestEnergyWeightDriftsDeterministically(t *testing.T) {
	p := ChainParams{}.withDefaults("mainnet")
	seen := map[int64]bool{}
	for n := int64(0); n < p.EnergyWeightPeriod; n += 100 {
		d := drift(p, n)
		if d < -p.EnergyWeightDrift || d > p.EnergyWeightDrift {
			t.Fatalf("drift(%d) = %d outside ±%d", n, d, p.EnergyWeightDrift)
		}
		if drift(p, n) != drift(p, n+p.EnergyWeightPeriod) {
			t.Fatalf("drift is not periodic at %d", n)
		}
		seen[d] = true
	}
	if len(seen) < 10 {
		t.Fatalf("drift takes only %d values over a period", len(seen))
	}
}

// BenchmarkCatchUp measures how fast a follower can read the chain through
// getblockbylimitnext (100 blocks per call, cached JSON).
func BenchmarkCatchUp(b *testing.B) {
	sim, err := New(Options{GenesisTime: testGenesis})
	if err != nil {
		b.Fatal(err)
	}
	defer sim.Close()
	if _, err := sim.Mine(5000); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	b.ResetTimer()
	blocks := 0
	for b.Loop() {
		for start := int64(0); start < 5000; start += 100 {
			body := fmt.Sprintf(`{"startNum":%d,"endNum":%d}`, start, start+100)
			resp, err := http.Post(srv.URL+"/wallet/getblockbylimitnext", "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			var list tron.BlockList
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Block) != 100 {
				b.Fatalf("decode: %v (%d blocks)", err, len(list.Block))
			}
			resp.Body.Close()
			blocks += len(list.Block)
		}
	}
	b.ReportMetric(float64(blocks)/b.Elapsed().Seconds(), "blocks/s")
}

// TestConcurrentTrafficWhileProducing runs the block producer, control transfers and chain
// readers at once (meant for -race) and checks every accepted transfer lands exactly once.
func TestConcurrentTrafficWhileProducing(t *testing.T) {
	h := newHarness(t, Options{BlockInterval: 2 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- h.sim.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	to := newKey(t).Address()
	txids := make(chan string, 40)
	errs := make(chan error, 4)
	for w := range 2 {
		go func() {
			for i := range 20 {
				id, err := h.sim.TransferTRX(to, int64(w*100+i+1), nil)
				if err != nil {
					errs <- err
					return
				}
				txids <- id
			}
			errs <- nil
		}()
	}
	for range 2 {
		go func() {
			for h.sim.Head().Number < 40 {
				top := h.sim.Head().Number
				resp, err := http.Post(h.url+"/wallet/getblockbylimitnext", "application/json",
					strings.NewReader(fmt.Sprintf(`{"startNum":%d,"endNum":%d}`, max(0, top-50), top+1)))
				if err != nil {
					errs <- err
					return
				}
				var list tron.BlockList
				err = json.NewDecoder(resp.Body).Decode(&list)
				resp.Body.Close()
				if err != nil {
					errs <- err
					return
				}
				for i := 1; i < len(list.Block); i++ {
					if list.Block[i].ParentHash() != list.Block[i-1].BlockID {
						errs <- fmt.Errorf("unlinked blocks at %d", list.Block[i].Number())
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(txids)
	var want int64
	for w := range 2 {
		for i := range 20 {
			want += int64(w*100 + i + 1)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for id := range txids {
		for h.sim.includedTx(id, false) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("transfer %s never landed", id)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if got := h.account(to).BalanceSun; got != want {
		t.Fatalf("receiver balance %d, want %d", got, want)
	}
}

func TestCreateAccountActivatesAndCharges(t *testing.T) {
	h := newHarness(t, Options{})
	payer := newKey(t)
	h.seed(GenesisAccount{Address: payer.Address(), BalanceSun: 5 * trx})
	fresh := newKey(t).Address()
	tx := h.signed("/wallet/createaccount", tron.CreateAccountRequest{OwnerAddress: payer.Address().Hex(), AccountAddress: fresh.Hex()}, payer)
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("broadcast %+v", r)
	}
	h.mine(1)
	var acc tron.Account
	h.wallet("/wallet/getaccount", tron.AddressRequest{Address: fresh.String(), Visible: true}, &acc)
	if acc.Address != fresh.String() || acc.CreateTime == 0 || acc.Balance != 0 {
		t.Fatalf("created account %+v", acc)
	}
	if got := h.account(payer.Address()).BalanceSun; got != 5*trx-1_100_000 {
		t.Fatalf("payer balance %d, want %d", got, 5*trx-1_100_000)
	}
	wantContains(t, h.walletError("/wallet/createaccount", tron.CreateAccountRequest{OwnerAddress: payer.Address().Hex(), AccountAddress: fresh.Hex()}),
		"Account has existed")
}

func TestDelegatedEnergyPaysForUSDTTransfer(t *testing.T) {
	h := newHarness(t, Options{})
	pool := newKey(t)
	user := newKey(t)
	h.seed(GenesisAccount{Address: pool.Address(), BalanceSun: 10 * trx, StakeEnergySun: 40_000 * trx})
	h.seed(GenesisAccount{Address: user.Address(), BalanceSun: 1 * trx, USDT: 5_000_000})
	h.broadcast(h.signed("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(),
		ReceiverAddress: user.Address().String(), Balance: 20_000 * trx, Resource: "ENERGY", Visible: true}, pool))
	h.mine(1)
	limit := h.account(user.Address()).EnergyLimit
	if limit < EnergyUSDTTransferToNew {
		t.Fatalf("delegated energy %d below a transfer's cost", limit)
	}

	// 1 TRX could never pay 130,285 energy by burning (13 TRX): the delegation pays.
	txid, err := h.sim.TransferUSDT(newKey(t).Address(), 1_000_000, &user, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.mine(1)
	info := h.info(txid)
	if info.Failed() || info.Receipt.EnergyUsage != EnergyUSDTTransferToNew || info.Receipt.EnergyFee != 0 || info.Fee != 0 {
		t.Fatalf("info %+v: the transfer should run on delegated energy alone", info)
	}
	v := h.account(user.Address())
	// Usage recovers linearly over 24 h of chain time; one block later a few units are back.
	if v.BalanceSun != 1*trx || v.EnergyUsed > EnergyUSDTTransferToNew || v.EnergyUsed < EnergyUSDTTransferToNew-10 || v.USDT != 4_000_000 {
		t.Fatalf("user after transfer %+v", v)
	}

	// Without enough energy or TRX the transfer still lands, but fails OUT_OF_ENERGY.
	txid, err = h.sim.TransferUSDT(newKey(t).Address(), 1_000_000, &user, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.mine(1)
	if info := h.info(txid); !info.Failed() || info.Receipt.Result != "OUT_OF_ENERGY" || len(info.Log) != 0 {
		t.Fatalf("info %+v, want OUT_OF_ENERGY without a log", info)
	}
	if got := h.account(user.Address()).USDT; got != 4_000_000 {
		t.Fatalf("USDT moved by a failed transfer: %d", got)
	}
}

// POST /sim/energy/use spends a receiver's delegated energy (getaccountresource shows it
// used, capped at the limit); an unknown address or a non-positive amount is refused.
func TestUseEnergyControl(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	tx := h.signed("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(),
		ReceiverAddress: recv.String(), Balance: 4_000 * trx, Resource: "ENERGY", Visible: true}, pool)
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("broadcast %+v", r)
	}
	h.mine(1)
	var res tron.AccountResource
	h.wallet("/wallet/getaccountresource", tron.AddressRequest{Address: recv.String(), Visible: true}, &res)
	if res.EnergyLimit <= 0 || res.EnergyUsed != 0 {
		t.Fatalf("before: %+v", res)
	}
	if st := h.do("POST", "/sim/energy/use", map[string]any{"address": recv.String(), "energy": 1_000}, nil); st != 200 {
		t.Fatalf("use: %d", st)
	}
	h.wallet("/wallet/getaccountresource", tron.AddressRequest{Address: recv.String(), Visible: true}, &res)
	if res.EnergyUsed != 1_000 {
		t.Fatalf("used %d, want 1000", res.EnergyUsed)
	}
	h.do("POST", "/sim/energy/use", map[string]any{"address": recv.String(), "energy": res.EnergyLimit * 2}, nil)
	h.wallet("/wallet/getaccountresource", tron.AddressRequest{Address: recv.String(), Visible: true}, &res)
	if res.EnergyUsed != res.EnergyLimit {
		t.Fatalf("used %d, want the limit %d", res.EnergyUsed, res.EnergyLimit)
	}
	stranger, _ := tron.GenerateKey()
	for _, body := range []map[string]any{{"address": stranger.Address().String(), "energy": 1}, {"address": recv.String(), "energy": 0}} {
		if st := h.do("POST", "/sim/energy/use", body, nil); st != 400 {
			t.Errorf("%v: %d, want 400", body, st)
		}
	}
}

// /wallet/getblock as java-tron's Wallet.getBlock answers it: the head when id_or_num is
// absent, by number or by id otherwise, and without detail the block's transactions left
// out (what chainwatch polls for the head, so that it does not read a full block a second).
func TestGetBlock(t *testing.T) {
	h := newHarness(t, Options{})
	to := newKey(t).Address()
	var tx struct{ TxID string }
	h.ctl("/sim/trx/transfer", map[string]any{"to": to.String(), "amount_sun": 5 * trx}, &tx)
	num := h.mine(1)

	var full, header, byNum, byID tron.Block
	h.wallet("/wallet/getnowblock", nil, &full)
	if full.Number() != num || len(full.Transactions) != 1 || full.Transactions[0].TxID != tx.TxID {
		t.Fatalf("getnowblock: block %d with %d transactions, want block %d with the transfer", full.Number(), len(full.Transactions), num)
	}
	h.wallet("/wallet/getblock", map[string]any{}, &header)
	if header.BlockID != full.BlockID || header.BlockHeader != full.BlockHeader || len(header.Transactions) != 0 {
		t.Fatalf("getblock without detail: %+v, want the head's header alone", header)
	}
	h.wallet("/wallet/getblock", map[string]any{"id_or_num": strconv.FormatInt(num, 10), "detail": true}, &byNum)
	if byNum.BlockID != full.BlockID || len(byNum.Transactions) != 1 {
		t.Fatalf("getblock by number with detail: %s with %d transactions", byNum.BlockID, len(byNum.Transactions))
	}
	h.wallet("/wallet/getblock", map[string]any{"id_or_num": full.BlockID}, &byID)
	if byID.BlockID != full.BlockID || len(byID.Transactions) != 0 {
		t.Fatalf("getblock by id: %s with %d transactions", byID.BlockID, len(byID.Transactions))
	}
	var byGet tron.Block
	if st := h.do(http.MethodGet, "/wallet/getblock?id_or_num=1&detail=true", nil, &byGet); st != 200 || byGet.Number() != 1 {
		t.Fatalf("GET getblock: status %d, block %d", st, byGet.Number())
	}
	var above map[string]any
	h.wallet("/wallet/getblock", map[string]any{"id_or_num": strconv.FormatInt(num+1, 10)}, &above)
	if len(above) != 0 {
		t.Fatalf("a number above the head answered %v, want {}", above)
	}
	if msg := h.walletError("/wallet/getblock", map[string]any{"id_or_num": "-1"}); msg != "num must be non-positive number." {
		t.Fatalf("negative number: %q", msg)
	}
	if msg := h.walletError("/wallet/getblock", map[string]any{"id_or_num": "abc"}); msg != "id must be legal block hash." {
		t.Fatalf("not an id: %q", msg)
	}
	var solid tron.Block
	h.wallet("/walletsolidity/getblock", map[string]any{}, &solid)
	if solid.Number() != max(num-19, 0) {
		t.Fatalf("walletsolidity/getblock: block %d, want the solidified block %d", solid.Number(), max(num-19, 0))
	}
}
