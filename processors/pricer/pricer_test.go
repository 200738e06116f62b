package pricer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/infra/pricecache"
	"rental/infra/pricestore"
	"rental/infra/supply"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/processors/pricer"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/pricing"
	"rental/schemas/topics"
)

// clock is a settable clock shared by the pricer and the edge-side source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type stack struct {
	store    *pricestore.Store
	sim      *tronsim.Sim
	provider *supply.ProviderServer
	pricer   *pricer.Pricer
	options  pricer.Options // the pricer's, for another pricer over the same sources
	source   *pricecache.Source
	brokers  []string
	clock    *clock
	reg      *prometheus.Registry
}

// poolStakeSun is the pool's energy stake: 1,000,000 TRX.
const poolStakeSun = 1_000_000 * tron.SunPerTRX

func newStack(t *testing.T) *stack {
	t.Helper()
	db := testenv.Postgres(t)
	rdb, prefix := testenv.Redis(t)
	brokers := []string{testenv.Kafka(t)}

	poolKey := tron.PrivateKeyFromBytes(bytes.Repeat([]byte{7}, 32))
	pool := poolKey.Address()
	sim, err := tronsim.New(tronsim.Options{
		Network: network.Mainnet,
		Genesis: []tronsim.GenesisAccount{{Address: pool, BalanceSun: 1000 * tron.SunPerTRX, StakeEnergySun: poolStakeSun}},
		Params:  tronsim.ChainParams{EnergyWeightDrift: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	node := httptest.NewServer(sim.Handler())
	t.Cleanup(node.Close)

	prov := supply.NewProviderServer("simmarket", []supply.WireOffer{
		{Resource: pricing.Energy, Tier: pricing.Tier1h, PriceSun: 7800, Amount: 2_000_000},
	})
	provSrv := httptest.NewServer(prov.Handler())
	t.Cleanup(provSrv.Close)

	tc := tron.NewClient(node.URL)
	collector := &supply.Collector{
		Pool:      supply.NewPool(tc, []tron.Address{pool}),
		Providers: []supply.Provider{supply.NewHTTPProvider("simmarket", provSrv.URL, nil)},
		Deep:      supply.NewDeepReserve(tc, tronsim.DeepReserveContract(), pool),
		DeepTiers: []pricing.Tier{pricing.Tier5m, pricing.Tier1h},
		MaxStale:  30 * time.Second,
	}
	producer, err := kafka.NewClient(brokers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)

	clk := &clock{t: time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)} // "day", factor 1.00
	reg := prometheus.NewRegistry()
	store := pricestore.New(db.Pool)
	opts := pricer.Options{
		Network: network.Mainnet, Models: store, Supply: collector, Producer: producer, Snapshots: store,
		Redis: rdb, RedisKey: prefix + "pricing", Now: clk.Now, Registerer: reg,
	}
	p, err := pricer.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	src := pricecache.NewSource(rdb, pricecache.SourceOptions{Network: network.Mainnet, Key: prefix + "pricing", PollEvery: time.Hour, Now: clk.Now})
	return &stack{store: store, sim: sim, provider: prov, pricer: p, options: opts, source: src, brokers: brokers, clock: clk, reg: reg}
}

func TestPricerPublishesASnapshotThatKafkaReadersAndTheEdgeSourceSee(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The edge side: subscribed before the pricer publishes, polling only hourly, so the
	// snapshot must arrive through pub/sub.
	go s.source.Run(ctx)
	select {
	case <-s.source.Ready():
	case <-ctx.Done():
		t.Fatal("source never subscribed")
	}
	if _, ok := s.source.Current(); ok {
		t.Fatal("a snapshot before the pricer ran")
	}

	start := time.Now()
	snap, err := s.pricer.Cycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("one cycle (model load, 3 sources, build, Redis + Kafka publish): %v", time.Since(start))

	// The energy 1h book has all three classes: the pool read from the chain (1,000,000 TRX
	// x 180e9 / (19e9 + 1e6) TRX of weight), the provider at 78.00 + 15 %, the deep reserve
	// at 85.00 (40 SUN + 3600 s x 0.0125 SUN) + 10 %.
	book := snap.Books[pricing.BookKey{Resource: pricing.Energy, Tier: pricing.Tier1h}]
	want := []pricing.Level{
		{PriceSun: 7500, Amount: 9_473_185, Class: pricing.ClassInstant},
		{PriceSun: 8970, Amount: 2_000_000, Class: pricing.ClassMarket},
		{PriceSun: 9350, Amount: 50_000_000, Class: pricing.ClassDeep},
	}
	if len(book.Levels) != 3 {
		t.Fatalf("levels %+v", book.Levels)
	}
	for i := range want {
		if book.Levels[i] != want[i] {
			t.Fatalf("level %d = %+v, want %+v", i, book.Levels[i], want[i])
		}
	}
	if snap.Table.AvailableEnergy != 61_473_185 || snap.Table.Network != network.Mainnet {
		t.Fatalf("table %+v", snap.Table)
	}

	// A separate consumer reads the record from the compacted topic and it matches the
	// JSON Schema published for data teams.
	cons, err := kafka.NewClient(s.brokers, kgo.ConsumeTopics(topics.MarketData.Name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var rec *kgo.Record
	for rec == nil {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { rec = r })
	}
	if string(rec.Key) != events.MarketDataKey {
		t.Fatalf("key %q", rec.Key)
	}
	validate(t, rec.Value)
	var md events.MarketData
	if err := json.Unmarshal(rec.Value, &md); err != nil {
		t.Fatal(err)
	}
	if !time.Time(md.AsOf).Equal(snap.AsOf) || len(md.Books) != 4 || md.ModelRevision != 1 {
		t.Fatalf("record as_of %v books %d revision %d", time.Time(md.AsOf), len(md.Books), md.ModelRevision)
	}

	// The edge source serves the same snapshot from memory.
	got, err := s.source.Wait(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := got.Price(pricing.Energy, pricing.Tier1h, 10_000_000)
	if err != nil {
		t.Fatal(err)
	}
	// 9,473,185 at 69.00 (the 2,000,000 volume tier) + 526,815 at 89.70:
	// 653,649,765 + 47,255,305.5 SUN, rounded up to whole SUN.
	if q.EnergyAmountSun != 700_905_071 || q.UnitPriceSun != 7009 || q.PriceSunPerUnit != 71 || !q.Walk.Complete {
		t.Fatalf("quote %+v", q)
	}
	if cur, ok := s.source.Current(); !ok || !cur.AsOf.Equal(snap.AsOf) {
		t.Fatal("Current does not serve the snapshot")
	}
	// Past valid_until the source refuses to serve it.
	s.clock.Add(11 * time.Second)
	if _, ok := s.source.Current(); ok {
		t.Fatal("an expired snapshot is served")
	}
	if age := metric(t, s.reg, "pricer_last_success_age_seconds"); age != 11 {
		t.Fatalf("last success age %v", age)
	}
}

func TestPriceChangesAppearInTheNextSnapshotWithoutRestart(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go s.source.Run(ctx)
	<-s.source.Ready()

	first, err := s.pricer.Cycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.source.Wait(ctx, time.Time{}); err != nil {
		t.Fatal(err)
	}
	key := pricing.BookKey{Resource: pricing.Energy, Tier: pricing.Tier1h}
	if _, err := s.store.SetBasePrice(ctx, network.Mainnet, key, 8050); err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.SetPaused(ctx, network.Mainnet, pricing.BookKey{Resource: pricing.Energy, Tier: pricing.Tier5m}, true); err != nil {
		t.Fatal(err)
	}
	s.provider.SetFailing(true) // a provider outage within MaxStale keeps its last offers

	s.clock.Add(3 * time.Second)
	second, err := s.pricer.Cycle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.source.Wait(ctx, first.AsOf)
	if err != nil {
		t.Fatal(err)
	}
	if !got.AsOf.Equal(second.AsOf) || got.ModelRevision <= first.ModelRevision {
		t.Fatalf("source holds %v rev %d", got.AsOf, got.ModelRevision)
	}
	q, err := got.Price(pricing.Energy, pricing.Tier1h, 32_000)
	if err != nil || q.UnitPriceSun != 8050 || q.PriceSunPerUnit != 81 {
		t.Fatalf("new price not served: %+v %v", q, err)
	}
	if _, err := got.Price(pricing.Energy, pricing.Tier5m, 32_000); err == nil {
		t.Fatal("paused row still sold")
	}
	if lv := got.Books[key].Levels; len(lv) != 3 || lv[1].Class != pricing.ClassMarket {
		t.Fatalf("provider offers lost on a short outage: %+v", lv)
	}
	if n := metric(t, s.reg, "pricer_supply_source_errors_total"); n != 1 {
		t.Fatalf("source errors counted %v", n)
	}

	// An invalid edit is refused by the store, and the model in force is unchanged.
	if _, err := s.store.SetFactor(ctx, network.Mainnet, "peak", 0); err == nil {
		t.Fatal("a zero factor was accepted")
	}
	m, err := s.store.Load(ctx, network.Mainnet)
	if err != nil || m.Revision != got.ModelRevision {
		t.Fatalf("revision %d after a refused edit, want %d (%v)", m.Revision, got.ModelRevision, err)
	}
}

// With Redis down the pricer still writes each snapshot to Postgres (the cycle reports the
// Redis failure), and a snapshot source over the dead Redis serves it from there until its
// valid_until; an older snapshot (a second pricer behind in time) never replaces a newer one.
func TestPricerKeepsTheSnapshotInPostgresWhileRedisIsDown(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pr := testenv.NewRedisServer(t) // never started: Redis is down throughout
	rdb := pr.Client()
	t.Cleanup(func() { rdb.Close() })
	o := s.options
	o.Redis, o.RedisKey, o.Producer = rdb, "", nil
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	p, err := pricer.New(o)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p.Cycle(ctx)
	if err == nil || !strings.Contains(err.Error(), "redis") {
		t.Fatalf("cycle with redis down: %v, want the redis failure reported", err)
	}
	if n := metric(t, reg, "pricer_cycle_failures_total"); n != 1 {
		t.Fatalf("%v failures counted, want 1 (redis)", n)
	}

	src := pricecache.NewSource(rdb, pricecache.SourceOptions{Network: network.Mainnet, Durable: s.store, Now: s.clock.Now})
	if err := src.Refresh(ctx); err != nil {
		t.Fatalf("refresh with redis down and the snapshot in postgres: %v", err)
	}
	got, ok := src.Current()
	if !ok || !got.AsOf.Equal(snap.AsOf) || got.ModelRevision != snap.ModelRevision {
		t.Fatalf("source holds %v (ok %v), want the snapshot of %v", got.AsOf, ok, snap.AsOf)
	}

	// A pricer whose clock is behind writes an older snapshot: the stored one stays.
	behind := o
	behind.Registerer = prometheus.NewRegistry()
	behind.Now = func() time.Time { return s.clock.Now().Add(-time.Second) }
	pb, err := pricer.New(behind)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pb.Cycle(ctx); err == nil {
		t.Fatal("redis down, yet the cycle reported no failure")
	}
	fresh := pricecache.NewSource(rdb, pricecache.SourceOptions{Network: network.Mainnet, Durable: s.store, Now: s.clock.Now})
	if err := fresh.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := fresh.Current(); !ok || !got.AsOf.Equal(snap.AsOf) {
		t.Fatalf("stored snapshot %v (ok %v), want the newest, %v", got.AsOf, ok, snap.AsOf)
	}

	// Past its valid_until it is not served, from memory or from Postgres.
	s.clock.Add(snap.ValidUntil.Sub(snap.AsOf) + time.Millisecond)
	if err := src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := src.Current(); ok {
		t.Fatal("a snapshot past its valid_until was served")
	}
}

func validate(t *testing.T, raw []byte) {
	t.Helper()
	schemaRaw, err := events.SchemaFiles.ReadFile("marketdata.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaRaw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("marketdata.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("marketdata.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("published record fails marketdata.schema.json: %v", err)
	}
}

// metric reads a single-series gauge or counter from the registry (summed over labels).
func metric(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
		return v
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}
