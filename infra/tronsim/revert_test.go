package tronsim

import (
	"encoding/hex"
	"testing"

	"rental/infra/tron"
)

// A transfer that would fail on chain answers as java-tron's triggerconstantcontract does:
// the call ran (result.result true), result.message says REVERT, energy_used is what the
// failing run cost, and the transaction's ret is FAILED with contractRet REVERT. The
// recipient being the zero address (20 zero bytes behind the 0x41 prefix) reverts, as
// does an amount above the sender's balance.
func TestConstantTransferRevertsLikeJavaTron(t *testing.T) {
	h := newHarness(t, Options{})
	faucet := h.sim.FaucetAddress()
	usdt := h.sim.USDTContract()
	zero, err := tron.AddressFromBytes(make([]byte, 20))
	if err != nil {
		t.Fatal(err)
	}
	call := func(owner, to tron.Address, amount int64) tron.TransactionExtention {
		var ext tron.TransactionExtention
		param := hex.EncodeToString(append(make([]byte, 12), to[1:]...)) + hex.EncodeToString(uint256(amount))
		h.wallet("/wallet/triggerconstantcontract", tron.TriggerSmartContractRequest{
			OwnerAddress: owner.String(), ContractAddress: usdt.String(), Visible: true,
			FunctionSelector: "transfer(address,uint256)", Parameter: param}, &ext)
		return ext
	}
	for name, ext := range map[string]tron.TransactionExtention{
		"to the zero address": call(faucet, zero, 1),
		"above the balance":   call(newKey(t).Address(), faucet, 1),
	} {
		if !ext.Result.Result || ext.Result.MessageText() != "REVERT opcode executed" || ext.EnergyUsed <= 0 {
			t.Errorf("%s: result %+v energy_used %d", name, ext.Result, ext.EnergyUsed)
		}
		if ext.Transaction == nil || len(ext.Transaction.Ret) != 1 || ext.Transaction.Ret[0].Ret != "FAILED" || ext.Transaction.Ret[0].ContractRet != "REVERT" {
			t.Errorf("%s: transaction ret %+v", name, ext.Transaction)
		}
	}
	if ok := call(faucet, newKey(t).Address(), 1); ok.Result.Message != "" || ok.EnergyUsed != EnergyUSDTTransferToNew ||
		ok.Transaction.Ret[0].ContractRet != "SUCCESS" {
		t.Errorf("a payable transfer: %+v", ok)
	}
}
