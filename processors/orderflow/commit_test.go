package orderflow

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/acceptance"
	"rental/infra/idempotency"
	"rental/infra/supply"
	"rental/infra/supplystore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
	"rental/schemas/pricing"
)

// plentySnapshots is a pricer's snapshot that lists far more own stock than the pools hold:
// the book of a pricer that read the chain before a burst of orders. Energy 1 h at 60 SUN.
type plentySnapshots struct {
	t   *testing.T
	net network.Network
}

func (s plentySnapshots) Current() (pricing.Snapshot, bool) {
	m := pricing.Model{
		Network:  s.net,
		Revision: 1,
		DayParts: []pricing.DayPart{{ID: "all", Label: "All day", StartMinute: 0, EndMinute: 1440, FactorBPS: 10_000}},
		Rows: []pricing.Row{
			{Resource: pricing.Energy, Tier: pricing.Tier1h, BasePrice: 6_000, MinAmount: 1, MaxAmount: 100_000_000, Enabled: true},
		},
		ActivationPriceSun: 1_100_000,
		ValidFor:           time.Minute,
	}
	snap, err := pricing.Build(pricing.Inputs{Model: m, Now: time.Now(),
		Supply: pricing.Supply{Instant: map[pricing.Resource]int64{pricing.Energy: 1 << 40}}})
	if err != nil {
		s.t.Error(err)
		return snap, false
	}
	return snap, true
}

// Pool exhaustion (issue 22): the pool holds about ten orders, forty arrive at once through
// two acceptance replicas (one with the group commit, one order per transaction) while the
// book still lists plenty. Every order is either refused at creation with 5001, charging
// nothing, or delivered whole: none is accepted and then failed for want of supply.
func TestPoolExhaustionAcceptsOnlyCommittedSupply(t *testing.T) {
	const stakeTRX, perOrderTRX, n = 1_000, 95, 40
	e := newEnv(t, stakeTRX)
	ctx := context.Background()
	res, err := e.node.GetAccountResource(ctx, e.pools[0].Address())
	if err != nil {
		t.Fatal(err)
	}
	amount, err := tron.EnergyForBalance(perOrderTRX*tron.SunPerTRX, res.TotalEnergyLimit, res.TotalEnergyWeight)
	if err != nil || amount <= 0 {
		t.Fatalf("energy for %d TRX: %d, %v", perOrderTRX, amount, err)
	}

	// The pricer's part: the committed supply refreshed every 50 ms from the chain.
	r := &supplystore.Refresher{Pool: e.db.Pool, Network: e.net, Now: e.clock.Now,
		Collector: &supply.Collector{Pool: supply.NewPool(e.node, []tron.Address{e.pools[0].Address()}), MaxStale: time.Second}}
	if _, fails := r.Collect(ctx); len(fails) > 0 {
		t.Fatalf("first refresh: %+v", fails)
	}
	rctx, stopRefresh := context.WithCancel(ctx)
	refreshed := make(chan struct{})
	go func() {
		defer close(refreshed)
		for rctx.Err() == nil {
			r.Collect(rctx)
			select {
			case <-rctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stopRefresh(); <-refreshed })
	// Own capacity is committed from a pool figure at least a second old (one allocation
	// may still be using): wait for the first.
	for deadline := time.Now().Add(30 * time.Second); ; {
		rows, err := supplystore.Rows(ctx, e.db.Pool, e.net)
		if err != nil {
			t.Fatal(err)
		}
		own := int64(0)
		for _, r := range rows {
			if r.Resource == "energy" && r.Source == supplystore.SourceOwn {
				own = r.Free
			}
		}
		if own > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no own capacity committable after 30 s: %+v", rows)
		}
		time.Sleep(50 * time.Millisecond)
	}

	prices, err := acceptance.NewPrices(acceptance.PricesOptions{Network: e.net, Snapshots: plentySnapshots{t, e.net}, Chain: e.node})
	if err != nil {
		t.Fatal(err)
	}
	replica := func(committers int) *acceptance.Orders {
		m, err := acceptance.NewOrders(acceptance.Options{Network: e.net, Prices: prices, Ledger: e.ledger,
			Idempotency: idempotency.New(e.db.Pool, idempotency.Options{}), CommitSupply: true, GroupCommitters: committers,
			LockWait: 30 * time.Second, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	replicas := []*acceptance.Orders{replica(2), replica(-1)}

	const fundsTRX = 10_000
	accs := []string{e.account(fundsTRX), e.account(fundsTRX), e.account(fundsTRX), e.account(fundsTRX)}
	receivers := make([]tron.Address, n)
	for i := range receivers {
		receivers[i] = e.receiver(true)
	}
	if _, err := e.sim.Mine(1); err != nil {
		t.Fatal(err)
	}
	e.startFlow()

	type outcome struct {
		acc   string
		id    string
		total int64
		err   error
	}
	out := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			acc := accs[i%len(accs)]
			a, err := replicas[i%2].Accept(ctx, acc, acceptance.Request{ClientOrderID: events.NewID("c"), Resource: pricing.Energy,
				Amount: amount, Tier: pricing.Tier1h, Receiver: receivers[i]})
			out[i] = outcome{acc: acc, err: err}
			if err == nil {
				var rec struct {
					ID    string `json:"id"`
					Total int64  `json:"total_amount_sun"`
				}
				if err := json.Unmarshal(a.Body, &rec); err != nil {
					t.Error(err)
				}
				out[i].id, out[i].total = rec.ID, rec.Total
			}
		})
	}
	wg.Wait()

	charged := map[string]int64{}
	accepted := 0
	for i, o := range out {
		if o.err != nil {
			if !errors.Is(o.err, apierr.InsufficientSupply) {
				t.Fatalf("order %d refused with %v, want 5001", i, o.err)
			}
			if av, ok := apierr.As(o.err).Details["available"].(int64); !ok || av >= amount {
				t.Fatalf("order %d refused with details %v: available should be below the amount %d", i, apierr.As(o.err).Details, amount)
			}
			continue
		}
		accepted++
		charged[o.acc] += o.total
	}
	if accepted == 0 || accepted == n {
		t.Fatalf("%d of %d orders accepted: the pool holds about ten", accepted, n)
	}
	for _, o := range out {
		if o.err != nil {
			continue
		}
		row := e.waitStatus(o.acc, o.id, 90*time.Second, orders.Active, orders.Failed)
		if row.Status != orders.Active || row.Partial {
			t.Errorf("accepted order %s ended %s (partial %v, failure %+v)", o.id, row.Status, row.Partial, row.Failure)
		}
	}
	// A refusal charged nothing: each account paid exactly its accepted orders.
	for _, acc := range accs {
		if bal, reserved := e.balance(acc); bal != fundsTRX*tron.SunPerTRX-charged[acc] || reserved != 0 {
			t.Errorf("account %s: balance %d reserved %d, want %d and 0", acc, bal, reserved, fundsTRX*tron.SunPerTRX-charged[acc])
		}
	}
	var stored int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != accepted {
		t.Errorf("%d orders stored, %d accepted: a refusal stored an order", stored, accepted)
	}
	t.Logf("%d of %d orders accepted and delivered, %d refused with 5001", accepted, n, n-accepted)
	e.invariants()
}
