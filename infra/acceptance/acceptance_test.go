package acceptance

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// Acceptance against real Postgres and the TRON simulator over HTTP: placements (the
// batch and refill path) and Accept (POST /v1/orders) share the receiver rule and the
// placed-before rule. The HTTP answers of the same rules are tested in edge.

// snapshots builds a snapshot at the current time whenever asked: energy 1 h at 60.00 SUN
// from the own pools.
type snapshots struct{ t *testing.T }

func (s snapshots) Current() (pricing.Snapshot, bool) {
	m := pricing.Model{
		Network:  network.Nile,
		Revision: 1,
		DayParts: []pricing.DayPart{{ID: "all", Label: "All day", StartMinute: 0, EndMinute: 1440, FactorBPS: 10_000}},
		Rows: []pricing.Row{
			{Resource: pricing.Energy, Tier: pricing.Tier1h, BasePrice: 6_000, MinAmount: 10_000, MaxAmount: 5_000_000, Enabled: true},
		},
		ActivationPriceSun: 1_100_000,
		ValidFor:           time.Minute,
	}
	snap, err := pricing.Build(pricing.Inputs{Model: m, Now: time.Now(),
		Supply: pricing.Supply{Instant: map[pricing.Resource]int64{pricing.Energy: 50_000_000}}})
	if err != nil {
		s.t.Error(err)
		return snap, false
	}
	return snap, true
}

type env struct {
	db        *testenv.DB
	ledger    *ledgerstore.Ledger
	orders    *Orders
	activated tron.Address // an activated receiver
	own       tron.Address // a configured pool address
}

func newEnv(t *testing.T, groupCommitters int) *env {
	t.Helper()
	e := &env{db: testenv.Postgres(t)}
	k, _ := tron.GenerateKey()
	e.activated = k.Address()
	p, _ := tron.GenerateKey()
	e.own = p.Address()
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile,
		Genesis: []tronsim.GenesisAccount{{Address: e.activated, BalanceSun: 5_000_000}}})
	if err != nil {
		t.Fatal(err)
	}
	node := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { node.Close(); _ = sim.Close() })
	if e.ledger, err = ledgerstore.New(e.db.Pool, ledgerstore.Options{Network: network.Nile}); err != nil {
		t.Fatal(err)
	}
	prices, err := NewPrices(PricesOptions{Network: network.Nile, Snapshots: snapshots{t}, Chain: tron.NewClient(node.URL)})
	if err != nil {
		t.Fatal(err)
	}
	e.orders, err = NewOrders(Options{Network: network.Nile, Prices: prices, Ledger: e.ledger,
		Idempotency: idempotency.New(e.db.Pool, idempotency.Options{}), OwnAddresses: []tron.Address{e.own},
		GroupCommitters: groupCommitters, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) account(t *testing.T, sun int64) string {
	t.Helper()
	ctx := context.Background()
	k, _ := tron.GenerateKey()
	id := events.NewID("acc")
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO accounts (id, network, owner_address, status) VALUES ($1, 'nile', $2, 'active')`,
		id, k.Address().String()); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
		_, err := e.ledger.Credit(ctx, tx, ledgerstore.Credit{AccountID: id, Kind: "adjustment", Ref: events.NewID("fund"), AmountSun: sun})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *env) available(t *testing.T, accountID string) int64 {
	t.Helper()
	s, err := e.ledger.Summary(context.Background(), accountID)
	if err != nil {
		t.Fatal(err)
	}
	return s.AvailableSun
}

func (e *env) place(t *testing.T, accountID string, p Placement) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), e.db.Pool, func(tx pgx.Tx) error {
		_, err := e.orders.PlaceTx(context.Background(), tx, accountID, p)
		return err
	})
}

// A placement is charged once: the same client_order_id in the same batch again is
// ErrPlacedBefore and charges nothing more.
func TestPlaceTxChargesOncePerClientOrderID(t *testing.T) {
	e := newEnv(t, -1)
	acc := e.account(t, 100_000_000)
	batch := "bat_0123456789abcdef01234567"
	p := Placement{ClientOrderID: batch + ":0", Resource: pricing.Energy, Amount: 10_000, Tier: pricing.Tier1h,
		Receiver: e.activated, BatchID: &batch}
	if err := e.place(t, acc, p); err != nil {
		t.Fatal(err)
	}
	after := e.available(t, acc)
	if after != 100_000_000-600_000 {
		t.Fatalf("available after one order of 600,000 SUN: %d", after)
	}
	if err := e.place(t, acc, p); !errors.Is(err, ErrPlacedBefore) {
		t.Fatalf("second placement: %v, want ErrPlacedBefore", err)
	}
	if got := e.available(t, acc); got != after {
		t.Fatalf("available after the repeated placement: %d, want %d", got, after)
	}
}

// The own-address rule is one: a placement, an accepted order and a batch's receiver list
// refuse a configured pool address and a stake pool known to the database alike (3003).
func TestOwnAddressRuleIsShared(t *testing.T) {
	e := newEnv(t, 1)
	ctx := context.Background()
	k, _ := tron.GenerateKey()
	stakePool := k.Address()
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO stake_pools (address, network) VALUES ($1, 'nile')`, stakePool.String()); err != nil {
		t.Fatal(err)
	}
	acc := e.account(t, 100_000_000)
	for i, rcv := range []tron.Address{e.own, stakePool} {
		p := Placement{ClientOrderID: "own-" + string(rune('a'+i)), Resource: pricing.Energy, Amount: 10_000, Tier: pricing.Tier1h, Receiver: rcv}
		if err := e.place(t, acc, p); !errors.Is(err, apierr.ReceiverIsOurs) {
			t.Errorf("placement to %s: %v, want 3003", rcv, err)
		}
		_, err := e.orders.Accept(ctx, acc, Request{ClientOrderID: "acc-" + string(rune('a'+i)), Resource: pricing.Energy,
			Amount: 10_000, Tier: pricing.Tier1h, Receiver: rcv})
		if !errors.Is(err, apierr.ReceiverIsOurs) {
			t.Errorf("accepted order to %s: %v, want 3003", rcv, err)
		}
	}
	err := e.orders.InTx(ctx, func(tx pgx.Tx) error {
		i, err := e.orders.FirstOurs(ctx, tx, []string{e.activated.String(), stakePool.String(), e.own.String()})
		if err == nil && i != 1 {
			t.Errorf("first own receiver of the list: %d, want 1", i)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.available(t, acc); got != 100_000_000 {
		t.Fatalf("refusals charged: available %d", got)
	}
}

// Accept stores an order once; the same client_order_id again replays the stored body and
// charges nothing (through the group commit and one by one alike).
func TestAcceptReplaysTheStoredOrder(t *testing.T) {
	for _, committers := range []int{1, -1} {
		e := newEnv(t, committers)
		ctx := context.Background()
		acc := e.account(t, 100_000_000)
		req := Request{ClientOrderID: "replay-1", Resource: pricing.Energy, Amount: 10_000, Tier: pricing.Tier1h, Receiver: e.activated}
		first, err := e.orders.Accept(ctx, acc, req)
		if err != nil || first.Replayed {
			t.Fatalf("committers %d: first: %+v %v", committers, first, err)
		}
		again, err := e.orders.Accept(ctx, acc, req)
		if err != nil || !again.Replayed || string(again.Body) != string(first.Body) {
			t.Fatalf("committers %d: repeat: replayed %v, body %s, err %v; first body %s", committers, again.Replayed, again.Body, err, first.Body)
		}
		if got := e.available(t, acc); got != 100_000_000-600_000 {
			t.Fatalf("committers %d: available %d after one order of 600,000 SUN", committers, got)
		}
	}
}
