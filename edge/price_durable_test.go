package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"rental/infra/pricecache"
	"rental/infra/pricestore"
	"rental/infra/testenv"
	"rental/schemas/network"
	"rental/schemas/pricing"
	"rental/schemas/scopes"
)

// Order creation keeps its prices through a Redis loss: the pricer's snapshot is also in
// Postgres (pricestore), and the snapshot source reads it when Redis fails or has no fresh
// snapshot. Across FLUSHALL, a Redis outage longer than a snapshot's validity and a restart
// of Redis without persistence, orders are accepted (201) by the running source and by one
// started afterwards (a replica started during the loss); once the last stored snapshot is
// past its valid_until, creation answers 503 5003 with Retry-After and charges nothing.
func TestOrdersKeepPricesThroughRedisLoss(t *testing.T) {
	pr := testenv.NewRedisServer(t)
	pr.Start(true)
	rdb := pr.Client()
	t.Cleanup(func() { rdb.Close() })

	oe := newOrdersEnv(t, nil)
	store := pricestore.New(oe.pg)
	writer := pricecache.NewWriter(rdb, network.Nile, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// publish does what the pricer does each cycle: the Postgres copy, then Redis (which
	// may be down).
	publish := func(at time.Time, redisUp bool) pricing.Snapshot {
		t.Helper()
		snap := buildSnapshot(t, at)
		body, err := json.Marshal(snap.Record())
		if err != nil {
			t.Fatal(err)
		}
		if err := store.SaveSnapshot(ctx, network.Nile, snap.AsOf, snap.ValidUntil, body); err != nil {
			t.Fatal(err)
		}
		if err := writer.Put(ctx, body); (err == nil) != redisUp {
			t.Fatalf("redis write with redis up=%v: %v", redisUp, err)
		}
		return snap
	}
	// source is an edge replica's snapshot source, started now.
	source := func() *pricecache.Source {
		t.Helper()
		src := pricecache.NewSource(rdb, pricecache.SourceOptions{Network: network.Nile, Durable: store,
			PollEvery: 20 * time.Millisecond, Now: oe.clock.Now})
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = src.Run(sctx) }()
		t.Cleanup(func() { stop(); <-done })
		return src
	}
	waitFor := func(src *pricecache.Source, snap pricing.Snapshot) {
		t.Helper()
		got, err := src.Wait(ctx, snap.AsOf.Add(-time.Nanosecond))
		if err != nil || !got.AsOf.Equal(snap.AsOf) {
			t.Fatalf("source holds %v (%v), want the snapshot of %v", got.AsOf, err, snap.AsOf)
		}
	}

	k := oe.key(t, scopes.OrdersWrite, scopes.OrdersRead)
	oe.fund(t, oe.acct.ID, 100_000_000)
	n := 0
	order := func() response {
		t.Helper()
		n++
		return oe.signed(t, k, "POST", "/v1/orders", orderJSON(map[string]any{"client_order_id": fmt.Sprintf("durable-%04d", n),
			"resource": "energy", "amount": 65_000, "tier": "1h", "receiver": oe.activated.String()}))
	}
	mustAccept := func(stage string) {
		t.Helper()
		if r := order(); r.status != 201 {
			t.Fatalf("%s: HTTP %d %s", stage, r.status, r.body)
		}
	}

	// Prices from Redis, as usual.
	s1 := publish(testT0, true)
	live := source()
	waitFor(live, s1)
	oe.snaps.use(live)
	mustAccept("redis up")

	// FLUSHALL: the running source keeps its snapshot; a replica started now finds Redis
	// empty and reads Postgres.
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	mustAccept("after FLUSHALL")
	started := source()
	waitFor(started, s1)
	oe.snaps.use(started)
	mustAccept("replica started after FLUSHALL")

	// Redis down for longer than s1's validity (1 min): the pricer writes Postgres only,
	// and the running source takes the new snapshot from there.
	pr.Stop()
	oe.clock.add(2 * time.Minute)
	s2 := publish(testT0.Add(2*time.Minute), false)
	waitFor(started, s2)
	mustAccept("redis down, s1 expired, s2 in postgres")
	waitFor(live, s2)
	oe.snaps.use(live)
	mustAccept("redis down, first source")

	// Redis back, empty (no persistence), before the pricer's next cycle: the running
	// source and a replica started now both serve s2.
	pr.Start(true)
	mustAccept("redis restarted empty")
	restarted := source()
	waitFor(restarted, s2)
	oe.snaps.use(restarted)
	mustAccept("replica started after the restart")

	// The last stored snapshot past its valid_until: 5003 with Retry-After, nothing charged.
	before := oe.summary(t, oe.acct.ID)
	oe.clock.add(time.Minute + time.Second)
	for _, src := range []*pricecache.Source{live, restarted, source()} {
		oe.snaps.use(src)
		if err := src.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		r := order()
		e := wantError(t, r, 503, 5003, "chain_unavailable", nil)
		if d, _ := e["details"].(map[string]any); d == nil || d["reason"] == nil {
			t.Errorf("5003 details %v: want a reason", e["details"])
		}
		if r.header.Get("Retry-After") != "1" {
			t.Errorf("5003 Retry-After %q, want 1", r.header.Get("Retry-After"))
		}
	}
	if after := oe.summary(t, oe.acct.ID); after.BalanceSun != before.BalanceSun || after.ReservedSun != before.ReservedSun {
		t.Fatalf("5003 charged: before %+v after %+v", before, after)
	}
	if got := oe.count(t, `SELECT count(*) FROM orders WHERE account_id = $1`, oe.acct.ID); got != 7 {
		t.Fatalf("%d orders, want the 7 accepted", got)
	}
}
