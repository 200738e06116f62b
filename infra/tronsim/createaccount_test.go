package tronsim

import (
	"testing"

	"rental/infra/tron"
	"rental/schemas/network"
)

// A TRX transfer to a new address as java-tron takes it: createtransaction checks only the
// amount plus CreateNewAccountFeeInSystemContract (TransferActuator.validate); at broadcast
// the account's creation first takes bandwidth from the sender's stake, or burns
// CreateAccountFee, and only then is the contract validated
// (BandwidthProcessor.consumeForCreateNewAccount before the actuator).
func TestAccountCreationOrder(t *testing.T) {
	h := newHarness(t, Options{Network: network.Nile})
	const amount = 2_000_000
	p := h.sim.opts.Params
	transfer := func(from tron.PrivateKey) *tron.Transaction {
		return h.signed("/wallet/createtransaction", tron.CreateTransactionRequest{OwnerAddress: from.Address().String(),
			ToAddress: newKey(t).Address().String(), Amount: amount, Visible: true}, from)
	}

	// Enough for the contract, not for the creation's burn on top: built, refused at
	// broadcast by the contract's own check (the burn is rolled back with it).
	poor := newKey(t)
	h.seed(GenesisAccount{Address: poor.Address(), BalanceSun: amount + p.CreateNewAccountFeeInSystemContract})
	r := h.broadcast(transfer(poor))
	if r.Result || r.Code != "CONTRACT_VALIDATE_ERROR" {
		t.Fatalf("broadcast without the creation fee: %+v", r)
	}
	if got := h.account(poor.Address()).BalanceSun; got != amount+p.CreateNewAccountFeeInSystemContract {
		t.Fatalf("a refused transfer burned: balance %d", got)
	}

	// The creation fee burned, then the contract: amount + both fees.
	paying := newKey(t)
	start := amount + p.CreateNewAccountFeeInSystemContract + p.CreateAccountFee + 5_000_000
	h.seed(GenesisAccount{Address: paying.Address(), BalanceSun: start})
	tx := transfer(paying)
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("broadcast: %+v", r)
	}
	h.mine(1)
	if info := h.info(tx.TxID); info.Receipt.NetFee != p.CreateAccountFee || info.Receipt.NetUsage != 0 {
		t.Fatalf("receipt %+v", info.Receipt)
	}
	if got := h.account(paying.Address()).BalanceSun; got != 5_000_000 {
		t.Fatalf("balance %d after the transfer, want 5 TRX", got)
	}

	// A sender with staked bandwidth pays the creation from its stake: nothing burned.
	staked := newKey(t)
	h.seed(GenesisAccount{Address: staked.Address(), BalanceSun: amount + p.CreateNewAccountFeeInSystemContract, StakeBandwidthSun: 1_000 * tron.SunPerTRX})
	tx = transfer(staked)
	if r := h.broadcast(tx); !r.Result {
		t.Fatalf("broadcast with a stake: %+v", r)
	}
	h.mine(1)
	if info := h.info(tx.TxID); info.Receipt.NetFee != 0 || info.Receipt.NetUsage <= 0 {
		t.Fatalf("receipt with a stake %+v", info.Receipt)
	}
	if got := h.account(staked.Address()).BalanceSun; got != 0 {
		t.Fatalf("balance %d after the transfer with a stake, want 0", got)
	}
}
