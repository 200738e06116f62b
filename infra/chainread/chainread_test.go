package chainread

import (
	"context"
	"crypto/rand"
	"errors"
	"math/big"
	"net/http/httptest"
	"testing"

	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
)

func addr(t *testing.T) tron.Address {
	t.Helper()
	var b [20]byte
	_, _ = rand.Read(b[:])
	a, err := tron.AddressFromBytes(b[:])
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type env struct {
	sim                        *tronsim.Sim
	node                       *tron.Client
	staker, holder, poor, none tron.Address
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{staker: addr(t), holder: addr(t), poor: addr(t), none: addr(t)}
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile, Genesis: []tronsim.GenesisAccount{
		{Address: e.staker, BalanceSun: 50_000_000, StakeEnergySun: 1_000_000_000, StakeBandwidthSun: 100_000_000, USDT: 5_000_000},
		{Address: e.holder, BalanceSun: 1_000_000, USDT: 1},
		{Address: e.poor, BalanceSun: 1_000_000},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	e.sim, e.node = sim, tron.NewClient(srv.URL)
	return e
}

func (e *env) reader(t *testing.T, o Options) *Reader {
	t.Helper()
	o.Node, o.Network, o.USDT = e.node, network.Nile, e.sim.USDTContract()
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResourcesOfActivatedAndNewAddresses(t *testing.T) {
	e := newEnv(t)
	r := e.reader(t, Options{})
	ctx := context.Background()
	got, err := r.Resources(ctx, e.staker)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Activated || got.BalanceSun != 50_000_000 || got.HoldsUSDT == nil || !*got.HoldsUSDT ||
		got.Energy.Limit <= 0 || got.Energy.Available != got.Energy.Limit-got.Energy.Used ||
		got.Bandwidth.FreeNetLimit <= 0 || got.Bandwidth.Limit <= got.Bandwidth.FreeNetLimit {
		t.Fatalf("staker %+v", got)
	}
	got, err = r.Resources(ctx, e.none)
	if err != nil {
		t.Fatal(err)
	}
	if got.Activated || got.BalanceSun != 0 || got.HoldsUSDT == nil || *got.HoldsUSDT || got.Energy.Limit != 0 || got.Address != e.none.String() {
		t.Fatalf("never activated %+v", got)
	}
}

func TestResourcesSharedCacheAndNodeDown(t *testing.T) {
	e := newEnv(t)
	rdb, prefix := testenv.Redis(t)
	a := e.reader(t, Options{Redis: rdb, RedisPrefix: prefix})
	b := e.reader(t, Options{Redis: rdb, RedisPrefix: prefix}) // another replica
	ctx := context.Background()
	first, err := a.Resources(ctx, e.holder)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.InjectFault(tronsim.FaultNodeDown, 100, 0); err != nil {
		t.Fatal(err)
	}
	got, err := b.Resources(ctx, e.holder)
	if err != nil {
		t.Fatalf("a second replica within the TTL must be served from the shared cache: %v", err)
	}
	if got.HoldsUSDT == nil || *got.HoldsUSDT != *first.HoldsUSDT || got.AsOf != first.AsOf || got.BalanceSun != first.BalanceSun || got.Bandwidth != first.Bandwidth {
		t.Fatalf("cached %+v, want %+v", got, first)
	}
	if _, err := b.Resources(ctx, e.poor); !errors.Is(err, tron.ErrNodeUnavailable) {
		t.Fatalf("uncached address with the node down: %v", err)
	}
}

func TestTransferEstimates(t *testing.T) {
	e := newEnv(t)
	r := e.reader(t, Options{})
	ctx := context.Background()
	usdt := e.sim.USDTContract()

	toHolder, err := r.EstimateTransfer(ctx, Transfer{From: e.staker, To: e.holder, Contract: usdt, Amount: big.NewInt(1_000_000)}, DefaultFallback)
	if err != nil {
		t.Fatal(err)
	}
	if !toHolder.Simulated || !toHolder.RecipientHoldsToken || toHolder.EnergyRequired != tronsim.EnergyUSDTTransferToHolder ||
		!toHolder.ToActivated || toHolder.EnergyFee != 100 || toHolder.BandwidthRequired < 250 || toHolder.BandwidthRequired > 400 {
		t.Fatalf("to a holder %+v", toHolder)
	}
	toNew, err := r.EstimateTransfer(ctx, Transfer{From: e.staker, To: e.none, Contract: usdt}, DefaultFallback)
	if err != nil {
		t.Fatal(err)
	}
	if !toNew.Simulated || toNew.RecipientHoldsToken || toNew.EnergyRequired != tronsim.EnergyUSDTTransferToNew || toNew.ToActivated {
		t.Fatalf("to a first-time holder %+v", toNew)
	}
	// The sender cannot cover the amount: the fallback figures.
	fb, err := r.EstimateTransfer(ctx, Transfer{From: e.poor, To: e.holder, Contract: usdt, Amount: big.NewInt(5)}, DefaultFallback)
	if err != nil || fb.Simulated || fb.EnergyRequired != DefaultFallback.ToHolder {
		t.Fatalf("fallback %+v %v", fb, err)
	}
	// A transfer to the zero address reverts although the sender can pay.
	zero, _ := tron.AddressFromBytes(make([]byte, 20))
	_, err = r.EstimateTransfer(ctx, Transfer{From: e.staker, To: zero, Contract: usdt, Amount: big.NewInt(1)}, DefaultFallback)
	var re *RevertError
	if !errors.As(err, &re) || re.EnergyUsed <= 0 {
		t.Fatalf("revert: %v", err)
	}
	if _, err := e.sim.InjectFault(tronsim.FaultNodeDown, 100, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.EstimateTransfer(ctx, Transfer{From: e.staker, To: e.holder, Contract: usdt}, DefaultFallback); !errors.Is(err, tron.ErrNodeUnavailable) {
		t.Fatalf("node down: %v", err)
	}
}
