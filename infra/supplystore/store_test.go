package supplystore

import (
	"bytes"
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/supply"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// newRefresher is a refresher over one simulated provider (HTTP on loopback) selling
// 300,000 energy for 1 h, on nile (no own pools, no deep reserve).
func newRefresher(t *testing.T) (*Refresher, *testenv.DB, *clock) {
	t.Helper()
	db := testenv.Postgres(t)
	prov := supply.NewProviderServer("p1", []supply.WireOffer{{Resource: pricing.Energy, Tier: pricing.Tier1h, PriceSun: 7800, Amount: 300_000}})
	srv := httptest.NewServer(prov.Handler())
	t.Cleanup(srv.Close)
	clk := &clock{t: time.Now()}
	r := &Refresher{Pool: db.Pool, Network: network.Nile, Now: clk.Now,
		Collector: &supply.Collector{Providers: []supply.Provider{supply.NewHTTPProvider("p1", srv.URL, nil)}, MaxStale: time.Minute, Now: clk.Now}}
	return r, db, clk
}

func free(t *testing.T, db *testenv.DB, res pricing.Resource, source string) int64 {
	t.Helper()
	rows, err := Rows(context.Background(), db.Pool, network.Nile)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Resource == string(res) && r.Source == source {
			return r.Free
		}
	}
	t.Fatalf("no row %s %s in %+v", res, source, rows)
	return 0
}

func listed(sup pricing.Supply, source string) int64 {
	var n int64
	for _, o := range sup.Offers {
		if o.Source == source {
			n += o.Amount
		}
	}
	return n
}

func collect(t *testing.T, r *Refresher) pricing.Supply {
	t.Helper()
	sup, fails := r.Collect(context.Background())
	for _, f := range fails {
		t.Fatalf("source %s failed: %v", f.Source, f.Err)
	}
	return sup
}

// A provider that answered "sold out" leaves the book and the committable supply at once;
// it comes back when the cool-down has passed, or as soon as it delivers an order.
func TestRefusedProviderIsNeitherListedNorCommitted(t *testing.T) {
	r, db, clk := newRefresher(t)
	ctx := context.Background()
	market := Market(pricing.Tier1h)
	if sup := collect(t, r); listed(sup, "p1") != 300_000 || free(t, db, pricing.Energy, market) != 300_000 {
		t.Fatalf("before any refusal: listed %d, committable %d", listed(sup, "p1"), free(t, db, pricing.Energy, market))
	}
	if err := RecordRefusal(ctx, db.Pool, network.Nile, "p1", clk.Now()); err != nil {
		t.Fatal(err)
	}
	if sup := collect(t, r); listed(sup, "p1") != 0 || free(t, db, pricing.Energy, market) != 0 {
		t.Fatalf("after the refusal: listed %d, committable %d", listed(sup, "p1"), free(t, db, pricing.Energy, market))
	}
	clk.Add(DefaultRefusalCooldown + time.Second)
	if sup := collect(t, r); listed(sup, "p1") != 300_000 || free(t, db, pricing.Energy, market) != 300_000 {
		t.Fatalf("after the cool-down: listed %d, committable %d", listed(sup, "p1"), free(t, db, pricing.Energy, market))
	}
	if err := RecordRefusal(ctx, db.Pool, network.Nile, "p1", clk.Now()); err != nil {
		t.Fatal(err)
	}
	if sup := collect(t, r); listed(sup, "p1") != 0 {
		t.Fatalf("after the second refusal: listed %d", listed(sup, "p1"))
	}
	if err := ClearRefusal(ctx, db.Pool, network.Nile, "p1"); err != nil { // it delivered an order
		t.Fatal(err)
	}
	if sup := collect(t, r); listed(sup, "p1") != 300_000 || free(t, db, pricing.Energy, market) != 300_000 {
		t.Fatalf("after a delivery: listed %d, committable %d", listed(sup, "p1"), free(t, db, pricing.Energy, market))
	}
}

// Units committed while the refresher reads the sources are not handed out again: the
// refresh subtracts what was committed since its snapshot of the orders in flight. Units of
// an order that no longer holds them (failed, here never stored) come back at the next
// refresh.
func TestRefreshKeepsWhatWasCommittedMeanwhile(t *testing.T) {
	r, db, _ := newRefresher(t)
	ctx := context.Background()
	collect(t, r)
	in, err := readInFlight(ctx, db.Pool, network.Nile, nil, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// An acceptance commits 100,000 between the snapshot and the write of the refresh.
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		l, err := Lock(ctx, tx, network.Nile, []string{"energy"})
		if err != nil {
			return err
		}
		if !l.Take("energy", "1h", 100_000, true) {
			t.Fatal("100,000 of 300,000 did not fit")
		}
		if l.Take("energy", "1h", 250_000, true) {
			t.Fatal("250,000 more fit in the 200,000 left")
		}
		b := &pgx.Batch{}
		l.QueueTaken(b)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	_, d, _ := r.Collector.CollectDetail(ctx)
	if err := set(ctx, db.Pool, network.Nile, rowsFrom(r.capacity(d, nil, nil, in), in), in.committed); err != nil {
		t.Fatal(err)
	}
	if got := free(t, db, pricing.Energy, Market(pricing.Tier1h)); got != 200_000 {
		t.Fatalf("committable after a refresh racing a commitment: %d, want 200,000", got)
	}
	collect(t, r)
	if got := free(t, db, pricing.Energy, Market(pricing.Tier1h)); got != 300_000 {
		t.Fatalf("committable once no order holds the units: %d, want 300,000", got)
	}
}

// Take draws as allocation does: own pools first (with the per-order rounding), the rest
// whole from the tier's providers or else from the deep reserve; without spill only own.
func TestTakeDrawsLikeAllocation(t *testing.T) {
	l := &Locked{taken: map[key]int64{}, rows: map[key]*row{
		{"energy", SourceOwn}:                 {free: 100_100, perOrder: 100},
		{"energy", Market(pricing.Tier1h)}:    {free: 50_000},
		{"energy", SourceDeep}:                {free: 80_000},
		{"bandwidth", Market(pricing.Tier5m)}: {free: 1_000},
	}}
	steps := []struct {
		res, tier string
		amount    int64
		spill     bool
		ok        bool
	}{
		{"energy", "1h", 100_001, false, false}, // own holds 100,000 after the rounding
		{"energy", "1h", 60_000, true, true},    // own
		{"energy", "1h", 80_000, true, true},    // 39,900 own (and its rounding), 40,100 market
		{"energy", "1h", 20_000, true, true},    // deep (market has 9,900)
		{"energy", "5m", 70_000, true, false},   // deep has 60,000, no 5m market
		{"bandwidth", "5m", 1_000, true, true},
		{"bandwidth", "1h", 1, true, false},
	}
	if got := l.Available("energy", "1h", true); got != 100_000+80_000 {
		t.Fatalf("available before any take: %d, want own 100,000 + deep 80,000", got)
	}
	if got := l.Available("energy", "1h", false); got != 100_000 {
		t.Fatalf("available from own stock only: %d, want 100,000", got)
	}
	for i, s := range steps {
		if got := l.Take(s.res, s.tier, s.amount, s.spill); got != s.ok {
			t.Fatalf("step %d %+v: %v", i, s, got)
		}
	}
	want := map[key]int64{{"energy", SourceOwn}: 100_100, {"energy", Market(pricing.Tier1h)}: 40_100, {"energy", SourceDeep}: 20_000,
		{"bandwidth", Market(pricing.Tier5m)}: 1_000}
	for k, v := range want {
		if l.taken[k] != v {
			t.Errorf("taken %v: %d, want %d (all %v)", k, l.taken[k], v, l.taken)
		}
	}
}

// Own capacity is committed from a pool figure at least PoolFigureMaxAge old, the age of
// the figure allocation may still use: none in the first refresh, the earlier figure (net
// of the margin, in whole TRX) once one is old enough.
func TestOwnCapacityComesFromAFigureAllocationAlreadySees(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	k := tron.PrivateKeyFromBytes(bytes.Repeat([]byte{9}, 32))
	sim, err := tronsim.New(tronsim.Options{Network: network.Mainnet, Params: tronsim.ChainParams{EnergyWeightDrift: -1},
		Genesis: []tronsim.GenesisAccount{{Address: k.Address(), BalanceSun: 1000 * tron.SunPerTRX, StakeEnergySun: 1_000_000 * tron.SunPerTRX}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	node := httptest.NewServer(sim.Handler())
	t.Cleanup(node.Close)
	tc := tron.NewClient(node.URL)
	clk := &clock{t: time.Now()}
	r := &Refresher{Pool: db.Pool, Network: network.Mainnet, Now: clk.Now,
		Collector: &supply.Collector{Pool: supply.NewPool(tc, []tron.Address{k.Address()}), MaxStale: time.Minute, Now: clk.Now}}
	own := func() (int64, bool) {
		rows, err := Rows(ctx, db.Pool, network.Mainnet)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range rows {
			if x.Resource == "energy" && x.Source == SourceOwn {
				return x.Free, true
			}
		}
		return 0, false
	}
	collect2 := func() {
		t.Helper()
		if _, fails := r.Collect(ctx); len(fails) > 0 {
			t.Fatalf("%+v", fails)
		}
	}
	collect2()
	if n, ok := own(); ok {
		t.Fatalf("own capacity %d committable from a figure read just now", n)
	}
	clk.Add(PoolFigureMaxAge + time.Millisecond)
	collect2()
	can, err := tc.GetCanDelegatedMaxSize(ctx, k.Address(), tron.Energy)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tc.GetAccountResource(ctx, k.Address())
	if err != nil {
		t.Fatal(err)
	}
	units, _ := tron.EnergyForBalance(can/tron.SunPerTRX*tron.SunPerTRX, res.TotalEnergyLimit, res.TotalEnergyWeight)
	if n, ok := own(); !ok || n != units*10_000/(10_000+DefaultMarginBps) {
		t.Fatalf("own capacity %d (row %v), want %d", n, ok, units*10_000/(10_000+DefaultMarginBps))
	}
}

// A commitment made against rows read without a lock (the group commit) fails with Raced,
// and writes nothing, when another transaction took the units in between.
func TestOptimisticCommitmentThatRacedFails(t *testing.T) {
	r, db, _ := newRefresher(t)
	ctx := context.Background()
	collect(t, r) // market:1h holds 300,000
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after the failure
	b := &pgx.Batch{}
	l := QueueRead(b, network.Nile, []string{"energy"})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if !l.Take("energy", "1h", 200_000, true) {
		t.Fatal("200,000 of 300,000 did not fit")
	}
	// Another acceptance takes 150,000 meanwhile.
	err = pgx.BeginFunc(ctx, db.Pool, func(tx2 pgx.Tx) error {
		l2, err := Lock(ctx, tx2, network.Nile, []string{"energy"})
		if err != nil {
			return err
		}
		if !l2.Take("energy", "1h", 150_000, true) {
			t.Fatal("150,000 did not fit")
		}
		b := &pgx.Batch{}
		l2.QueueTaken(b)
		return tx2.SendBatch(ctx, b).Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	b = &pgx.Batch{}
	l.QueueTaken(b)
	if err := tx.SendBatch(ctx, b).Close(); !Raced(err) {
		t.Fatalf("the raced commitment: %v, want Raced", err)
	}
	_ = tx.Rollback(ctx)
	if got := free(t, db, pricing.Energy, Market(pricing.Tier1h)); got != 150_000 {
		t.Fatalf("committable after the race: %d, want 150,000", got)
	}
}
