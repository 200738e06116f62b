package orderflow

import (
	"context"
	"net"
	"testing"
	"time"

	"rental/infra/supply"
	"rental/infra/supplystore"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// On nile the one provider delivers, from its own stake and small inventory: the order is
// filled by it (filled_by its slug, reclaim unavailable), verified on chain like our own
// delegations, and an order beyond its inventory is not filled by the own pool.
func TestNileOrdersAreFilledByTheProvider(t *testing.T) {
	pk := poolKey(99)
	e := newEnvOn(t, network.Nile, []tronsim.GenesisAccount{{Address: pk.Address(), BalanceSun: 1_000 * tron.SunPerTRX,
		StakeEnergySun: 5_000_000 * tron.SunPerTRX}})
	prov := supply.NewProviderServer("nileprov", supply.DefaultOffers(network.Nile)).
		WithChain(supply.ProviderChain{Node: e.node, Key: pk, LockCap: network.Nile.MaxLockPeriodBlocks()})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = prov.Serve(ctx, ln.Addr().String(), nil); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.providers = []Provider{supply.NewHTTPProvider("nileprov", "http://"+ln.Addr().String(), nil)}
	e.startFlow()

	acc := e.account(500)
	to := e.receiver(true)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 100_000, tier: "1h", receiver: to})
	row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Active, orders.Failed)
	if row.Status != orders.Active || row.FilledBy == nil || *row.FilledBy != "nileprov" || row.Partial {
		t.Fatalf("order %+v filled_by %v", row.Record, row.FilledBy)
	}
	ds, err := e.node.GetDelegatedResourceV2(context.Background(), pk.Address(), to)
	if err != nil || len(ds) == 0 || ds[0].FrozenBalanceForEnergy <= 0 {
		t.Fatalf("no provider delegation on chain: %v %v", ds, err)
	}
	if d := e.delegated(to, orders.Energy); d != 0 {
		t.Fatalf("the own pool delegated %d SUN on nile", d)
	}

	// The provider has 300,000 1 h energy in all; 100,000 is gone. A 250,000 order is more
	// than it has and the own pool does not sell on nile: nothing is delivered, the charge
	// is reversed. Its refusal is recorded until it delivers again.
	big := e.order(acc, orderSpec{resource: orders.Energy, amount: 250_000, tier: "1h", receiver: e.receiver(true)})
	row = e.waitStatus(acc, big.ID, 20*time.Second, orders.Active, orders.Failed)
	if row.Status != orders.Failed || row.Failure == nil || row.Failure.Code != 5001 {
		t.Fatalf("large nile order %s failure %+v", row.Status, row.Failure)
	}
	// The refusal is recorded: the pricer neither lists nor commits the provider's stock
	// until it delivers again (infra/supplystore), which the next order that fits makes it do.
	refused := func() bool {
		t.Helper()
		r, err := supplystore.Refused(context.Background(), e.db.Pool, network.Nile, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return r["nileprov"]
	}
	if !refused() {
		t.Fatal("the provider's sold-out answer was not recorded")
	}
	small := e.order(acc, orderSpec{resource: orders.Energy, amount: 50_000, tier: "1h", receiver: e.receiver(true)})
	if row = e.waitStatus(acc, small.ID, 20*time.Second, orders.Active, orders.Failed); row.Status != orders.Active {
		t.Fatalf("small nile order %s failure %+v", row.Status, row.Failure)
	}
	if refused() {
		t.Fatal("the provider delivered, yet its refusal is still recorded")
	}
	e.invariants()
}
