package tronsim

import (
	"encoding/hex"
	"testing"

	"rental/infra/tron"
)

// Wallet.triggerContract builds a non-constant call without looking the owner up
// (createTransactionCapsule validates no TriggerSmartContract), so a never-activated owner
// gets its transaction; the node refuses it at broadcast, where BandwidthProcessor.consume
// finds no account.
func TestTriggerOfNeverActivatedOwnerBuildsAndIsRefusedAtBroadcast(t *testing.T) {
	h := newHarness(t, Options{})
	k := newKey(t) // never activated
	to := newKey(t).Address()
	param := hex.EncodeToString(append(make([]byte, 12), to[1:]...)) + hex.EncodeToString(uint256(5))
	req := tron.TriggerSmartContractRequest{OwnerAddress: k.Address().String(), ContractAddress: h.sim.USDTContract().String(),
		Visible: true, FunctionSelector: "transfer(address,uint256)", Parameter: param, FeeLimit: 50 * trx}
	var ext tron.TransactionExtention
	h.wallet("/wallet/triggersmartcontract", req, &ext)
	if !ext.Result.Result || ext.Transaction == nil {
		t.Fatalf("build for a never-activated owner refused: %+v", ext.Result)
	}
	if err := tron.SignTransaction(ext.Transaction, k); err != nil {
		t.Fatal(err)
	}
	r := h.broadcast(ext.Transaction)
	if r.Result || r.Code != "CONTRACT_VALIDATE_ERROR" {
		t.Fatalf("broadcast %+v, want CONTRACT_VALIDATE_ERROR", r)
	}
	wantContains(t, hexText(r.Message), "does not exist")
}

// Manager.getTxFromPending: a broadcast transaction is found pending until its block, then
// no longer (gettransactioninfobyid has it).
func TestTransactionFromPendingUntilItsBlock(t *testing.T) {
	h := newHarness(t, Options{})
	k := newKey(t)
	h.seed(GenesisAccount{Address: k.Address(), BalanceSun: 100 * trx})
	tx := h.signed("/wallet/createtransaction", tron.CreateTransactionRequest{OwnerAddress: k.Address().String(),
		ToAddress: newKey(t).Address().String(), Amount: trx, Visible: true}, k)
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("broadcast %+v", r)
	}
	var pending tron.Transaction
	h.wallet("/wallet/gettransactionfrompending", tron.ValueRequest{Value: tx.TxID, Visible: true}, &pending)
	if pending.TxID != tx.TxID {
		t.Fatalf("pending %q, want %s", pending.TxID, tx.TxID)
	}
	h.mine(1)
	var after tron.Transaction
	h.wallet("/wallet/gettransactionfrompending", tron.ValueRequest{Value: tx.TxID, Visible: true}, &after)
	if after.TxID != "" {
		t.Fatalf("still pending after its block: %+v", after)
	}
}
