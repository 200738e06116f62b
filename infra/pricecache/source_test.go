package pricecache_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"rental/infra/pricecache"
	"rental/infra/pricestore"
	"rental/infra/testenv"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// record is a snapshot of the default model computed at at, as the pricer encodes it.
func record(t *testing.T, at time.Time) (pricing.Snapshot, []byte) {
	t.Helper()
	snap, err := pricing.Build(pricing.Inputs{Model: pricing.DefaultModel(network.Nile), Now: at})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(snap.Record())
	if err != nil {
		t.Fatal(err)
	}
	return snap, b
}

// Redis holding an expired snapshot (a Redis that came back with old data) does not hide
// the fresh one in Postgres; a Redis outage is logged once when it starts and once when it
// ends, however many polls fail in between.
func TestSourcePrefersAFreshPostgresCopyAndLogsOutagesOnce(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	store := pricestore.New(db.Pool)
	srv := testenv.NewRedisServer(t)
	srv.Start(true)
	rdb := srv.Client()
	t.Cleanup(func() { rdb.Close() })

	t0 := time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)
	now := t0
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	log := &testenv.LogBuffer{}
	src := pricecache.NewSource(rdb, pricecache.SourceOptions{Network: network.Nile, Durable: store, Now: clock,
		Logger: slog.New(slog.NewTextHandler(log, nil))})

	old, oldRec := record(t, t0)
	if err := pricecache.NewWriter(rdb, network.Nile, "", "").Put(ctx, oldRec); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = t0.Add(time.Minute) // old is long past its valid_until
	mu.Unlock()
	fresh, freshRec := record(t, now)
	if err := store.SaveSnapshot(ctx, network.Nile, fresh.AsOf, fresh.ValidUntil, freshRec); err != nil {
		t.Fatal(err)
	}
	// An older snapshot written later (a pricer behind in time) does not replace it.
	if err := store.SaveSnapshot(ctx, network.Nile, old.AsOf, old.ValidUntil, oldRec); err != nil {
		t.Fatal(err)
	}
	if err := src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := src.Current(); !ok || !got.AsOf.Equal(fresh.AsOf) {
		t.Fatalf("holds %v (ok %v), want the fresh Postgres snapshot of %v", got.AsOf, ok, fresh.AsOf)
	}

	srv.Stop()
	for range 3 {
		if err := src.Refresh(ctx); err != nil {
			t.Fatalf("refresh with redis down and postgres up: %v", err)
		}
	}
	srv.Start(true)
	if err := src.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	out := log.String()
	if strings.Count(out, "redis unavailable") != 1 || strings.Count(out, "redis available again") != 1 ||
		!strings.Contains(out, "failed_reads=3") {
		t.Fatalf("want one line per state change, with the count of failed reads; log:\n%s", out)
	}
}
