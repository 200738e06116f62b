package tronsim

import (
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"rental/infra/tron"
)

// Each test here mirrors one java-tron behaviour the service depends on; the source it comes
// from is named in the test's comment (docs/chain.md lists them).

// BandwidthProcessor.consume: staked bandwidth first (useAccountNet), then the daily free
// allowance (useFreeNet), then TRX burned at getTransactionFee per byte
// (useTransactionFee); with none of them the broadcast is BANDWITH_ERROR "Account resource
// insufficient error." (Wallet.broadcastTransaction).
func TestBandwidthIsChargedInJavaTronsOrder(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h) // pool: 100 TRX, energy stake only
	req := tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 10 * trx, Resource: "ENERGY", Visible: true}
	send := func() (broadcastReply, string) {
		tx := h.signed("/wallet/delegateresource", req, pool)
		return h.broadcast(tx), tx.TxID
	}
	// First two (about 280 bytes each): the free allowance (600 bytes a day) pays.
	for i := range 2 {
		r, id := send()
		h.mine(1)
		if info := h.info(id); !r.Result || info.Receipt.NetUsage == 0 || info.Receipt.NetFee != 0 {
			t.Fatalf("delegation %d: %+v receipt %+v; want it paid from the free allowance", i, r, info.Receipt)
		}
	}
	// Third on the same day: the allowance is spent, TRX is burned.
	before := h.account(pool.Address()).BalanceSun
	r, id := send()
	h.mine(1)
	info := h.info(id)
	if !r.Result || info.Receipt.NetFee == 0 || info.Receipt.NetUsage != 0 {
		t.Fatalf("second delegation: %+v receipt %+v; want its bytes burned", r, info.Receipt)
	}
	if got := h.account(pool.Address()).BalanceSun; before-got != info.Receipt.NetFee || info.Fee != info.Receipt.NetFee {
		t.Fatalf("burned %d, receipt net_fee %d fee %d", before-got, info.Receipt.NetFee, info.Fee)
	}
	// No TRX left: refused at broadcast with BANDWITH_ERROR.
	h.seed(GenesisAccount{Address: pool.Address(), StakeEnergySun: 10_000 * trx})
	if r, _ = send(); r.Result || r.Code != "BANDWITH_ERROR" || r.Message != "Account resource insufficient error." {
		t.Fatalf("pool without TRX or bandwidth: %+v", r)
	}
	// Staked bandwidth pays before anything else.
	h.seed(GenesisAccount{Address: pool.Address(), StakeEnergySun: 10_000 * trx, StakeBandwidthSun: 1_000 * trx})
	r, id = send()
	h.mine(1)
	if info := h.info(id); !r.Result || info.Receipt.NetUsage == 0 || info.Receipt.NetFee != 0 {
		t.Fatalf("with staked bandwidth: %+v receipt %+v", r, info.Receipt)
	}
}

// Wallet.triggerContract: a non-constant call is returned built, not run; only a constant
// call (triggerconstantcontract) runs it. A transfer that will revert is therefore built,
// accepted, and lands as REVERT, burning its energy.
func TestNonConstantTriggerIsBuiltWithoutRunning(t *testing.T) {
	h := newHarness(t, Options{})
	k := newKey(t)
	h.seed(GenesisAccount{Address: k.Address(), BalanceSun: 100 * trx}) // no USDT
	usdt := h.sim.USDTContract()
	to := newKey(t).Address()
	param := hex.EncodeToString(append(make([]byte, 12), to[1:]...)) + hex.EncodeToString(uint256(5))
	req := tron.TriggerSmartContractRequest{OwnerAddress: k.Address().String(), ContractAddress: usdt.String(), Visible: true,
		FunctionSelector: "transfer(address,uint256)", Parameter: param, FeeLimit: 50 * trx}

	var constant tron.TransactionExtention
	h.wallet("/wallet/triggerconstantcontract", req, &constant)
	if len(constant.Transaction.Ret) == 0 || constant.Transaction.Ret[0].ContractRet != "REVERT" {
		t.Fatalf("constant call of a transfer without funds: %+v", constant.Transaction.Ret)
	}
	if constant.Result.Message != "REVERT opcode executed" {
		t.Fatalf("constant call message %q, want the text under visible=true", constant.Result.Message)
	}

	var ext tron.TransactionExtention
	h.wallet("/wallet/triggersmartcontract", req, &ext)
	if !ext.Result.Result || ext.Transaction == nil {
		t.Fatalf("non-constant build refused: %+v", ext)
	}
	if err := tron.SignTransaction(ext.Transaction, k); err != nil {
		t.Fatal(err)
	}
	if r := h.broadcast(ext.Transaction); !r.Result {
		t.Fatalf("broadcast %+v", r)
	}
	h.mine(1)
	info := h.info(ext.Transaction.TxID)
	if info.Receipt.Result != "REVERT" || info.Receipt.EnergyFee == 0 {
		t.Fatalf("landed %+v; want REVERT with its energy burned", info.Receipt)
	}

	// A contract that does not exist is refused when building (the only check).
	req.ContractAddress = newKey(t).Address().String()
	var bad tron.TransactionExtention
	h.wallet("/wallet/triggersmartcontract", req, &bad)
	if bad.Result.Result || bad.Result.Code != "CONTRACT_VALIDATE_ERROR" || bad.Result.Message != "No contract or not a valid smart contract" {
		t.Fatalf("trigger of no contract: %+v", bad.Result)
	}
}

// UnDelegateResourceActuator and DelegatedResourceStore.unLockExpireResource: a locked
// delegation becomes undelegatable only once expire < the block's time (not <=).
func TestLockEndsOnlyWhenExpireIsBeforeNow(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	h.seed(GenesisAccount{Address: pool.Address(), BalanceSun: 100 * trx, StakeEnergySun: 10_000 * trx, StakeBandwidthSun: 1_000 * trx})
	tx := h.signed("/wallet/delegateresource", tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(),
		ReceiverAddress: recv.String(), Balance: 100 * trx, Resource: "ENERGY", Lock: true, LockPeriod: 2, Visible: true}, pool)
	h.broadcast(tx)
	num := h.mine(1)
	undelegate := tron.UnDelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 100 * trx, Resource: "ENERGY", Visible: true}
	// The delegation's block ran at block num's time; its lock ends 2 blocks later, which
	// is block num+2's time: a transaction for block num+2 sees expire == now, refused.
	h.mine(1) // head num+1: the next block is num+2
	wantContains(t, h.walletError("/wallet/undelegateresource", undelegate), "insufficient delegateFrozenBalance(Energy), request=100000000, unlock_balance=0")
	h.mine(1) // next block num+3: expire < now
	utx := h.signed("/wallet/undelegateresource", undelegate, pool)
	if r := h.broadcast(utx); !r.Result {
		t.Fatalf("undelegation after the lock: %+v", r)
	}
	if h.mine(1) != num+3 || h.info(utx.TxID).BlockNumber != num+3 {
		t.Fatalf("undelegation not in block %d", num+3)
	}
}

// Return.message is bytes: JsonFormat prints it as text under visible=true, as hex
// otherwise (Wallet.broadcastTransaction's messages).
func TestReturnMessageIsTextUnderVisible(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	req := tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 100 * trx, Resource: "ENERGY", Visible: true}
	tx := h.signed("/wallet/delegateresource", req, pool)
	h.broadcast(tx)
	if r := h.broadcast(tx); r.Message != "Dup transaction." {
		t.Fatalf("visible message %q", r.Message)
	}
	tx.Visible = false
	var raw map[string]any
	h.wallet("/wallet/broadcasttransaction", tx, &raw)
	if raw["message"] != hex.EncodeToString([]byte("Dup transaction.")) {
		t.Fatalf("non-visible message %v", raw["message"])
	}
}

// GetBlockByLimitNextServlet prints the BlockList it got, so a valid range above the head
// is {"block":[]}; an invalid range is {}.
func TestEmptyBlockRangeIsAnEmptyList(t *testing.T) {
	h := newHarness(t, Options{})
	head := h.mine(2)
	post := func(start, end int64) string {
		resp, err := http.Post(h.url+"/wallet/getblockbylimitnext", "application/json",
			strings.NewReader(`{"startNum":`+strconv.FormatInt(start, 10)+`,"endNum":`+strconv.FormatInt(end, 10)+`,"visible":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b))
	}
	if got := post(head+1, head+5); got != `{"block":[]}` {
		t.Fatalf("range above the head: %s", got)
	}
	if got := post(5, 5); got != `{}` {
		t.Fatalf("empty range: %s", got)
	}
}

// Wallet.broadcastTransaction answers BLOCK_UNSOLIDIFIED, NO_CONNECTION,
// NOT_ENOUGH_EFFECTIVE_CONNECTION and SERVER_BUSY before the transaction reaches the
// pending pool (the same bytes are taken later), and NOT_ENOUGH_EFFECTIVE_CONNECTION
// "P2P broadcast failed." after pushTransaction took it (it lands).
func TestEveryBroadcastCodeCanBeProduced(t *testing.T) {
	h := newHarness(t, Options{})
	pool, recv := delegationSetup(t, h)
	h.seed(GenesisAccount{Address: pool.Address(), BalanceSun: 100 * trx, StakeEnergySun: 10_000 * trx, StakeBandwidthSun: 1_000 * trx})
	req := tron.DelegateResourceRequest{OwnerAddress: pool.Address().String(), ReceiverAddress: recv.String(),
		Balance: 10 * trx, Resource: "ENERGY", Visible: true}
	for _, c := range []struct {
		kind FaultKind
		code string
		msg  string
	}{
		{FaultBlockUnsolidified, "BLOCK_UNSOLIDIFIED", "Block unsolidified."},
		{FaultNoConnection, "NO_CONNECTION", "No connection."},
		{FaultNotEnoughConn, "NOT_ENOUGH_EFFECTIVE_CONNECTION", "Effective connection:0 lt minEffectiveConnection:1"},
		{FaultServerBusy, "SERVER_BUSY", "Server busy."},
	} {
		h.ctl("/sim/faults", map[string]any{"kind": c.kind, "count": 1}, nil)
		tx := h.signed("/wallet/delegateresource", req, pool)
		if r := h.broadcast(tx); r.Result || r.Code != c.code || r.Message != c.msg {
			t.Fatalf("%s: %+v", c.kind, r)
		}
		if r := h.broadcast(tx); !r.Result {
			t.Fatalf("%s: the same bytes again: %+v", c.kind, r)
		}
		h.mine(1)
		if h.info(tx.TxID).BlockNumber == 0 {
			t.Fatalf("%s: the retried transaction did not land", c.kind)
		}
	}
	h.ctl("/sim/faults", map[string]any{"kind": FaultP2PFailed, "count": 1}, nil)
	tx := h.signed("/wallet/delegateresource", req, pool)
	if r := h.broadcast(tx); r.Result || r.Code != "NOT_ENOUGH_EFFECTIVE_CONNECTION" || r.Message != "P2P broadcast failed." {
		t.Fatalf("p2p_failed: %+v", r)
	}
	h.mine(1)
	if h.info(tx.TxID).BlockNumber == 0 {
		t.Fatal("a transaction answered P2P broadcast failed did not land")
	}
}
