package orderflow

import (
	"context"
	"testing"
	"time"

	"rental/infra/supply"
	"rental/infra/testenv/chainstack"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/orders"
)

// What the own pool cannot deliver is rented from the deep reserve: the first pool pays
// the contract, the contract delegates from its own address, the order is delivered whole
// (not partial), names the deep reserve in filled_by, and the rental goes back by itself
// while the pool's part is undelegated at expiry.
func TestOrderBeyondThePoolIsRentedFromTheDeepReserve(t *testing.T) {
	const poolTRX = 2_000
	e := newEnv(t, poolTRX)
	ctx := context.Background()
	contract := tronsim.DeepReserveContract()
	e.deep = supply.NewDeepReserve(e.node, contract, chainstack.SignerKey().Address())
	e.startFlow()

	res, err := e.node.GetAccountResource(ctx, e.pools[0].Address())
	if err != nil {
		t.Fatal(err)
	}
	poolEnergy, err := tron.EnergyForBalance(poolTRX*tron.SunPerTRX, res.TotalEnergyLimit, res.TotalEnergyWeight)
	if err != nil {
		t.Fatal(err)
	}
	deepBefore, err := e.deep.Available(ctx)
	if err != nil {
		t.Fatal(err)
	}
	payerBefore, err := e.node.GetAccount(ctx, chainstack.SignerKey().Address())
	if err != nil {
		t.Fatal(err)
	}

	acc := e.account(100_000)
	to := e.receiver(true)
	amount := poolEnergy + 300_000
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: amount, tier: "5m", receiver: to})
	row := e.waitStatus(acc, o.ID, 30*time.Second, orders.Active, orders.Failed)
	if row.Status != orders.Active || row.Partial || row.DeliveredAmount != amount {
		t.Fatalf("order %s partial %v delivered %d of %d (failure %+v)", row.Status, row.Partial, row.DeliveredAmount, amount, row.Failure)
	}
	if row.FilledBy == nil || *row.FilledBy != orders.FilledByDeep || len(row.DelegateHashes) != 2 {
		t.Fatalf("filled_by %v, delegate_hashes %v: want the deep reserve and two hashes", row.FilledBy, row.DelegateHashes)
	}
	// On chain: the pool's delegation and the contract's, together at least the amount.
	ds, err := e.node.GetDelegatedResourceV2(ctx, contract, to)
	if err != nil || len(ds) == 0 || ds[0].FrozenBalanceForEnergy <= 0 {
		t.Fatalf("no deep reserve delegation to the receiver: %+v %v", ds, err)
	}
	if e.delegated(to, orders.Energy) <= 0 {
		t.Fatal("the pool delegated nothing")
	}
	rr, err := e.node.GetAccountResource(ctx, to)
	if err != nil || rr.EnergyLimit < amount {
		t.Fatalf("receiver energy limit %d, ordered %d (%v)", rr.EnergyLimit, amount, err)
	}
	var deepPart int64
	if err := e.db.Pool.QueryRow(ctx, `SELECT amount FROM order_fills WHERE order_id = $1 AND source = 'deep' AND state = 'landed'`, o.ID).
		Scan(&deepPart); err != nil {
		t.Fatalf("deep fill: %v", err)
	}
	if after, err := e.deep.Available(ctx); err != nil || after != deepBefore-deepPart {
		t.Fatalf("deep reserve available %d after renting %d of %d (%v)", after, deepPart, deepBefore, err)
	}
	// The payer (the signer key's own account, never a pool) paid the rental: the contract's
	// price for the deep part and the tier.
	price, err := e.deep.RentalPrice(ctx, deepPart, 300)
	if err != nil {
		t.Fatal(err)
	}
	payerAfter, err := e.node.GetAccount(ctx, chainstack.SignerKey().Address())
	if err != nil {
		t.Fatal(err)
	}
	if paid := payerBefore.Balance - payerAfter.Balance; paid < price || paid > price+tronsim.DeepRentEnergy*100 {
		t.Fatalf("the payer paid %d, the rental costs %d plus at most the call's energy", paid, price)
	}

	// Expiry: the pool's part is undelegated by the processor, the contract's ends by
	// itself once the chain passes the rental's end.
	e.clock.Add(5*time.Minute + time.Second)
	e.waitStatus(acc, o.ID, 30*time.Second, orders.Expired)
	if d := e.delegated(to, orders.Energy); d != 0 {
		t.Fatalf("the pool still delegates %d SUN after expiry", d)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, err := e.node.GetDelegatedResourceV2(ctx, contract, to)
		if err == nil && len(ds) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deep rental was not returned: %+v %v", ds, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.invariants()
}
