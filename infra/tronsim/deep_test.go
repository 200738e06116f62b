package tronsim

import (
	"encoding/hex"
	"math/big"
	"testing"

	"rental/infra/tron"
)

func TestDeepReserveRentDelegatesUntilTheRentalEnds(t *testing.T) {
	h := newHarness(t, Options{})
	deep := DeepReserveContract()
	renter := newKey(t)
	h.seed(GenesisAccount{Address: renter.Address(), BalanceSun: 1_000 * trx})
	receiver := newKey(t).Address()
	h.seed(GenesisAccount{Address: receiver, BalanceSun: trx})

	call := func(data []byte) *big.Int {
		t.Helper()
		var ext tron.TransactionExtention
		h.wallet("/wallet/triggerconstantcontract", tron.TriggerSmartContractRequest{
			OwnerAddress: renter.Address().String(), ContractAddress: deep.String(), Visible: true, Data: hex.EncodeToString(data)}, &ext)
		if !ext.Result.Result || len(ext.ConstantResult) != 1 {
			t.Fatalf("constant call %+v", ext)
		}
		b, _ := hex.DecodeString(ext.ConstantResult[0])
		return new(big.Int).SetBytes(b)
	}
	available := func() int64 { return call(SelDeepAvailableEnergy).Int64() }
	const amount, secs = 65_000, 6 // two blocks of chain time
	price := call(append(append(append([]byte{}, SelDeepRentalPrice...), uint256(amount)...), uint256(secs)...)).Int64()
	before := available()

	rent := func(callValue int64) tron.TransactionInfo {
		t.Helper()
		data := append(append([]byte{}, SelDeepRent...), append(make([]byte, 12), receiver[1:]...)...)
		data = append(append(data, uint256(amount)...), uint256(secs)...)
		var ext tron.TransactionExtention
		h.wallet("/wallet/triggersmartcontract", tron.TriggerSmartContractRequest{
			OwnerAddress: renter.Address().String(), ContractAddress: deep.String(), Visible: true,
			Data: hex.EncodeToString(data), CallValue: callValue, FeeLimit: 50 * trx}, &ext)
		if !ext.Result.Result || ext.Transaction == nil {
			t.Fatalf("triggersmartcontract %+v", ext)
		}
		if err := tron.SignTransaction(ext.Transaction, renter); err != nil {
			t.Fatal(err)
		}
		if r := h.broadcast(ext.Transaction); !r.Result {
			t.Fatalf("broadcast %+v", r)
		}
		h.mine(1)
		return h.info(ext.Transaction.TxID)
	}

	// Underpaid: reverts, the renter pays the call's energy only, nothing is delegated.
	balance := h.account(renter.Address()).BalanceSun
	// The renter has no staked bandwidth: the daily free allowance pays the first call's
	// bytes, TRX the second's (BandwidthProcessor), reported as the receipt's net_fee.
	under := rent(price - 1)
	if under.Receipt.Result != "REVERT" {
		t.Fatalf("underpaid rent: %+v", under.Receipt)
	}
	if got := h.account(renter.Address()).BalanceSun; balance-got != DeepRentEnergy*100+under.Receipt.NetFee {
		t.Fatalf("underpaid rent cost %d, want the call's energy %d", balance-got, DeepRentEnergy*100)
	}
	if got := h.account(receiver); got.EnergyLimit != 0 || available() != before {
		t.Fatalf("after a reverted rent: receiver limit %d, available %d (was %d)", got.EnergyLimit, available(), before)
	}

	balance = h.account(renter.Address()).BalanceSun
	info := rent(price)
	if info.Receipt.Result != "SUCCESS" {
		t.Fatalf("rent: %+v", info.Receipt)
	}
	if info.Receipt.NetFee == 0 || info.Receipt.NetUsage != 0 {
		t.Fatalf("second call of the day: bandwidth %d from the allowance, %d SUN burned; want it burned", info.Receipt.NetUsage, info.Receipt.NetFee)
	}
	if got := h.account(renter.Address()).BalanceSun; balance-got != price+DeepRentEnergy*100+info.Receipt.NetFee {
		t.Fatalf("rent cost %d, want the price %d, the call's energy and its bandwidth", balance-got, price)
	}
	r := h.account(receiver)
	if r.EnergyLimit < amount {
		t.Fatalf("receiver energy limit %d after renting %d", r.EnergyLimit, amount)
	}
	var ds tron.DelegatedResourceList
	h.wallet("/wallet/getdelegatedresourcev2", tron.DelegatedResourceRequest{FromAddress: deep.String(), ToAddress: receiver.String(), Visible: true}, &ds)
	if len(ds.DelegatedResource) != 1 || ds.DelegatedResource[0].FrozenBalanceForEnergy != r.AcquiredEnergySun {
		t.Fatalf("delegations from the contract %+v, receiver acquired %d", ds, r.AcquiredEnergySun)
	}
	if got := available(); got != before-amount {
		t.Fatalf("available %d after renting %d of %d", got, amount, before)
	}

	// The rental ends two blocks of chain time later: the energy goes back.
	h.mine(3)
	if got := h.account(receiver); got.EnergyLimit != 0 || got.AcquiredEnergySun != 0 {
		t.Fatalf("after the rental ended the receiver still has limit %d (acquired %d)", got.EnergyLimit, got.AcquiredEnergySun)
	}
	if got := available(); got != before {
		t.Fatalf("available %d after the rental ended, want %d", got, before)
	}
}
