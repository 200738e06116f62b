package marketwatch

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"rental/infra/marketfeed"
	"rental/infra/marketstore"
	"rental/infra/supply"
	"rental/infra/testenv"
	"rental/schemas/market"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

func provider(t *testing.T, slug string, price pricing.Centisun) (*supply.ProviderServer, marketfeed.Feed) {
	t.Helper()
	p := supply.NewProviderServer(slug, []supply.WireOffer{
		{Resource: pricing.Energy, Tier: pricing.Tier1h, PriceSun: price, Amount: 400_000},
		{Resource: pricing.Energy, Tier: pricing.Tier1h, PriceSun: price + 500, Amount: 100_000},
		{Resource: pricing.Energy, Tier: pricing.Tier1d, PriceSun: price * 3, Amount: 100_000},
		{Resource: pricing.Bandwidth, Tier: pricing.Tier1h, PriceSun: 1, Amount: 100_000},
	})
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	return p, marketfeed.NewOffers(slug, srv.URL)
}

func TestCyclesStoreSamplesAndAFailingProviderAges(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	store := marketstore.New(db.Pool, network.Nile)
	_, cheap := provider(t, "simcheap", 4_550)
	_, mid := provider(t, "simmid", 6_000)
	flakyP, flaky := provider(t, "simflaky", 5_000)

	m := pricing.DefaultModel(network.Nile)
	m.ValidFor = 24 * time.Hour
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	snap, err := pricing.Build(pricing.Inputs{Model: m, Now: t0, Supply: pricing.Supply{Instant: map[pricing.Resource]int64{pricing.Energy: 2_000_000}}})
	if err != nil {
		t.Fatal(err)
	}
	self := marketfeed.Snapshot{SlugName: "tronrent", Src: pricing.StaticSource{Snap: snap}}

	now := t0
	w, err := New(Options{Feeds: []marketfeed.Feed{cheap, mid, flaky, self}, Store: store, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if n := w.Once(ctx); n != 4 {
		t.Fatalf("first cycle stored %d samples, want 4", n)
	}
	if n := w.Once(ctx); n != 0 {
		t.Fatalf("a second cycle in the same slot stored %d (a second replica must not double samples)", n)
	}
	flakyP.SetFailing(true)
	now = t0.Add(20 * time.Minute)
	if n := w.Once(ctx); n != 3 {
		t.Fatalf("cycle with one provider down stored %d, want 3", n)
	}

	latest, err := store.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	provs, err := store.Providers(ctx)
	if err != nil || len(provs) != 4 {
		t.Fatalf("metadata rows added for new feeds: %v %v", provs, err)
	}
	b := market.BuildBoard(now, 100, provs, latest)
	row := map[string]market.Row{}
	for _, r := range b.Providers {
		row[r.Slug] = r
	}
	if r := row["simcheap"]; r.Stale || *r.PriceSun1h != 4_550 || *r.PriceSun1d != 13_650 || *r.AvailableEnergy != 500_000 || *r.Rank != 1 {
		t.Errorf("simcheap %+v", r)
	}
	if r := row["simflaky"]; !r.Stale || !time.Time(*r.TS).Equal(t0) {
		t.Errorf("the provider that stopped answering must be stale with its last sample: %+v", r)
	}
	if r := row["tronrent"]; r.Stale || r.PriceSun1h == nil || *r.AvailableEnergy != snap.Table.AvailableEnergy {
		t.Errorf("own row %+v", r)
	}
	if b.Summary.ActiveProviders != 3 {
		t.Errorf("summary %+v", b.Summary)
	}
	var published int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE topic = 'market.samples.v1'`).Scan(&published); err != nil || published != 7 {
		t.Fatalf("outbox records %d (%v), want one per stored sample (7)", published, err)
	}

	// Pruning after the retention.
	now = t0.Add(market.Retention + 30*time.Minute)
	flakyP.SetFailing(false)
	w.Once(ctx)
	h, _ := store.History(ctx, "simcheap", t0.Add(-time.Hour))
	if len(h) != 1 || !h[0].TS.Equal(now) {
		t.Fatalf("samples past the retention are pruned: %+v", h)
	}
}

// laterSource has no snapshot until set, as the pricer's source right after a start.
type laterSource struct {
	mu   sync.Mutex
	snap *pricing.Snapshot
}

func (s *laterSource) Current() (pricing.Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		return pricing.Snapshot{}, false
	}
	return *s.snap, true
}

// The own row sampled before the pricer's first snapshot fails; Run tries it again every
// RetryEvery, so the row fills within seconds instead of waiting a whole Every (5 min).
func TestRunRetriesAFailedFeedWithinItsSlot(t *testing.T) {
	db := testenv.Postgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := marketstore.New(db.Pool, network.Nile)
	src := &laterSource{}
	self := marketfeed.Snapshot{SlugName: "tronrent", Src: src}
	w, err := New(Options{Feeds: []marketfeed.Feed{self}, Store: store, Every: time.Hour, RetryEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	m := pricing.DefaultModel(network.Nile)
	m.ValidFor = time.Hour
	snap, err := pricing.Build(pricing.Inputs{Model: m, Now: time.Now(), Supply: pricing.Supply{Instant: map[pricing.Resource]int64{pricing.Energy: 2_000_000}}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // a few failed tries first
	src.mu.Lock()
	src.snap = &snap
	src.mu.Unlock()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		h, err := store.History(ctx, "tronrent", time.Now().Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(h) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("own row not sampled after the snapshot appeared: %d samples", len(h))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
