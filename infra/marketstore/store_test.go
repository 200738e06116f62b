package marketstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"rental/infra/testenv"
	"rental/schemas/events"
	"rental/schemas/market"
	"rental/schemas/network"
)

func price(v int64) *events.Centisun { c := events.Centisun(v); return &c }

func TestSamplesOneSlotOneRowWithItsOutboxRecord(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	s := New(db.Pool, network.Nile)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	e := int64(1_000)
	for i, at := range []time.Time{t0, t0.Add(time.Minute), t0.Add(5 * time.Minute), t0.Add(-2 * time.Hour)} {
		stored, err := s.AddSample(ctx, market.Sample{Slug: "simcheap", TS: at, Quote: market.Quote{PriceSun1h: price(5000 + int64(i)), AvailableEnergy: &e}}, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := i != 1; stored != want {
			t.Fatalf("sample %d stored=%v, want %v (one per 5-minute slot)", i, stored, want)
		}
	}
	var outboxRows int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE topic = 'market.samples.v1' AND key = 'simcheap'`).Scan(&outboxRows); err != nil {
		t.Fatal(err)
	}
	if outboxRows != 3 {
		t.Fatalf("%d outbox records, want one per stored sample (3)", outboxRows)
	}
	latest, err := s.Latest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l := latest["simcheap"]; !l.TS.Equal(t0.Add(5*time.Minute)) || *l.PriceSun1h != 5002 || l.PriceSun1d != nil {
		t.Fatalf("latest %+v", l)
	}
	h, err := s.History(ctx, "simcheap", t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || !h[0].TS.Equal(t0) || !h[1].TS.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("history oldest first within the window: %+v", h)
	}
	if h, _ := s.History(ctx, "nobody", t0.Add(-time.Hour)); h == nil || len(h) != 0 {
		t.Fatalf("unknown slug: %v", h)
	}
	// Another network's store sees nothing.
	if l, _ := New(db.Pool, network.Mainnet).Latest(ctx); len(l) != 0 {
		t.Fatalf("mainnet sees nile samples: %v", l)
	}
	n, err := s.Prune(ctx, t0.Add(-time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
}

func TestProviderMetadata(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	s := New(db.Pool, network.Nile)
	if err := s.EnsureProvider(ctx, "simcheap", []market.Kind{market.KindAPI}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Provider(ctx, "simcheap")
	if err != nil || p.Name != "simcheap" || !p.Enabled || len(p.Kinds) != 1 {
		t.Fatalf("defaults %+v %v", p, err)
	}
	p.Name = "Sim Cheap"
	p.Kinds = []market.Kind{market.KindBot, market.KindWeb}
	_ = p.Links.Set("site", "https://cheap.example")
	if err := s.PutProvider(ctx, p, "support:ann"); err != nil {
		t.Fatal(err)
	}
	// The sampler's EnsureProvider does not undo an operator's edit.
	if err := s.EnsureProvider(ctx, "simcheap", []market.Kind{market.KindAPI}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Provider(ctx, "simcheap")
	if got.Name != "Sim Cheap" || len(got.Kinds) != 2 || got.Links.Site == nil || *got.Links.Site != "https://cheap.example" || got.Links.Docs != nil {
		t.Fatalf("after edit %+v", got)
	}
	if err := s.PutProvider(ctx, market.Provider{Slug: "x", Name: "X", Kinds: []market.Kind{"tv"}}, "a"); err == nil {
		t.Fatal("unknown kind accepted")
	}
	if err := s.DeleteProvider(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
	all, _ := s.Providers(ctx)
	if len(all) != 1 {
		t.Fatalf("providers %v", all)
	}
}
