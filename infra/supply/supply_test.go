package supply_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"rental/infra/supply"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

func simNode(t *testing.T, genesis ...tronsim.GenesisAccount) (*tronsim.Sim, *tron.Client) {
	t.Helper()
	sim, err := tronsim.New(tronsim.Options{Network: network.Mainnet, Genesis: genesis, Params: tronsim.ChainParams{EnergyWeightDrift: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return sim, tron.NewClient(srv.URL)
}

var poolAddr = tron.PrivateKeyFromBytes(bytes.Repeat([]byte{9}, 32)).Address()

func TestPoolInventoryFromTheChain(t *testing.T) {
	_, node := simNode(t, tronsim.GenesisAccount{Address: poolAddr, BalanceSun: 10 * tron.SunPerTRX,
		StakeEnergySun: 1_000_000 * tron.SunPerTRX, StakeBandwidthSun: 100_000 * tron.SunPerTRX})
	inv, err := supply.NewPool(node, []tron.Address{poolAddr}).Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// energy: 1e6 TRX x 180e9 / (19e9 + 1e6); bandwidth: 1e5 TRX x 43.2e9 / (26e9 + 1e5).
	want := map[pricing.Resource]int64{pricing.Energy: 9_473_185, pricing.Bandwidth: 166_153}
	if !reflect.DeepEqual(inv, want) {
		t.Fatalf("inventory %v, want %v", inv, want)
	}
	none, err := supply.NewPool(node, nil).AvailableEnergy(context.Background())
	if err != nil || none != 0 {
		t.Fatalf("no pools: %d %v", none, err)
	}
}

func TestDeepReserveReadThroughTriggerConstantContract(t *testing.T) {
	sim, node := simNode(t, tronsim.GenesisAccount{Address: poolAddr, BalanceSun: 10 * tron.SunPerTRX})
	deep := supply.NewDeepReserve(node, tronsim.DeepReserveContract(), poolAddr)
	offers, err := deep.Offers(context.Background(), []pricing.Tier{pricing.Tier5m, pricing.Tier1h})
	if err != nil {
		t.Fatal(err)
	}
	// 40 SUN + 300 s x 0.0125 = 43.75; 40 + 3600 x 0.0125 = 85.
	if len(offers) != 2 || offers[0].Cost != 4375 || offers[1].Cost != 8500 || offers[0].Amount != 50_000_000 || offers[1].Class != pricing.ClassDeep {
		t.Fatalf("offers %+v", offers)
	}
	if err := sim.SetDeepReserve(tronsim.DeepReserve{AvailableEnergy: 0, BaseMicroSun: 1, RateMicroSunPerSecond: 1}); err != nil {
		t.Fatal(err)
	}
	if offers, err := deep.Offers(context.Background(), []pricing.Tier{pricing.Tier1h}); err != nil || len(offers) != 0 {
		t.Fatalf("an empty pool offers %+v %v", offers, err)
	}
	// A contract that is not there is an error, not an empty book.
	if _, err := supply.NewDeepReserve(node, poolAddr, poolAddr).Offers(context.Background(), []pricing.Tier{pricing.Tier1h}); err == nil {
		t.Fatal("a missing contract read as no supply")
	}
}

func TestHTTPProviderAgainstTheSimulatedProvider(t *testing.T) {
	ps := supply.NewProviderServer("sim", supply.DefaultOffers(network.Nile))
	srv := httptest.NewServer(ps.Handler())
	defer srv.Close()
	p := supply.NewHTTPProvider("sim", srv.URL, nil)
	offers, err := p.ListOffers(context.Background())
	if err != nil || len(offers) != 3 || offers[1] != (pricing.Offer{Class: pricing.ClassMarket, Source: "sim", Resource: pricing.Energy, Tier: pricing.Tier1h, Cost: 7800, Amount: 300_000}) {
		t.Fatalf("offers %+v %v", offers, err)
	}
	// Control API replaces the offers; a bad offer is refused.
	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v1/offers", strings.NewReader(`[{"resource":"energy","tier":"5m","price_sun":61.25,"amount":10}]`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT offers: %v %v", resp, err)
	}
	if offers, _ := p.ListOffers(context.Background()); len(offers) != 1 || offers[0].Cost != 6125 {
		t.Fatalf("after PUT %+v", offers)
	}
	req, _ = http.NewRequest(http.MethodPut, srv.URL+"/v1/offers", strings.NewReader(`[{"resource":"energy","tier":"2h","price_sun":1,"amount":10}]`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Fatalf("bad offer accepted: %v %v", resp, err)
	}
	ps.SetFailing(true)
	if _, err := p.ListOffers(context.Background()); err == nil {
		t.Fatal("a 503 read as no offers")
	}
}

func TestCollectorKeepsALastGoodAnswerOnlyForMaxStale(t *testing.T) {
	ps := supply.NewProviderServer("sim", supply.DefaultOffers(network.Nile))
	srv := httptest.NewServer(ps.Handler())
	defer srv.Close()
	now := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	c := &supply.Collector{Providers: []supply.Provider{supply.NewHTTPProvider("sim", srv.URL, nil)}, MaxStale: 30 * time.Second,
		Now: func() time.Time { return now }}
	ctx := context.Background()
	if sup, errs := c.Collect(ctx); len(errs) != 0 || len(sup.Offers) != 3 {
		t.Fatalf("first collect %+v %v", sup, errs)
	}
	ps.SetFailing(true)
	now = now.Add(30 * time.Second)
	if sup, errs := c.Collect(ctx); len(errs) != 1 || !errs[0].Stale || len(sup.Offers) != 3 {
		t.Fatalf("within MaxStale: %+v %+v", sup, errs)
	}
	now = now.Add(time.Millisecond)
	if sup, errs := c.Collect(ctx); len(errs) != 1 || errs[0].Stale || len(sup.Offers) != 0 {
		t.Fatalf("past MaxStale: %+v %+v", sup, errs)
	}
}
