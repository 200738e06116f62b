package orderflow

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/acceptance"
	"rental/infra/health"
	"rental/infra/idempotency"
	"rental/infra/orderstore"
	"rental/infra/tronsim"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/orders"
	"rental/schemas/pricing"
)

// A node that stops answering drives delivery behind: once the oldest accepted order has
// waited longer than the backlog's bound, creation refuses with 5050 (Retry-After), storing
// and charging nothing, and the status reports delivery degraded. When the node answers
// again the backlog drains and creation accepts again, with nobody intervening.
func TestCreationRefusesWhileDeliveryIsBehindAndRecovers(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	backlog := orderstore.NewBacklog(e.db.Pool, orderstore.BacklogOptions{Network: e.net, MaxAge: 2 * time.Second, Every: 100 * time.Millisecond})
	prices, err := acceptance.NewPrices(acceptance.PricesOptions{Network: e.net, Snapshots: plentySnapshots{t: t, net: e.net}, Chain: e.node,
		ActivationTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := acceptance.NewOrders(acceptance.Options{Network: e.net, Prices: prices, Ledger: e.ledger,
		Idempotency: idempotency.New(e.db.Pool, idempotency.Options{}), Backlog: backlog, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	status := health.NewChecker(health.Options{Database: health.NewPostgres(e.db.Pool), Backlog: backlog, TTL: time.Nanosecond})
	account := e.account(1_000)
	to := e.receiver(true)
	if _, err := e.sim.Mine(1); err != nil { // the activating transfer lands
		t.Fatal(err)
	}
	accept := func() (acceptance.Accepted, string, error) {
		id := events.NewID("c")
		a, err := acc.Accept(context.Background(), account, acceptance.Request{ClientOrderID: id, Resource: pricing.Energy,
			Amount: 65_000, Tier: pricing.Tier1h, Receiver: to})
		return a, id, err
	}

	// Healthy: accepted and delivered (this also caches the receiver's activation).
	if _, _, err := accept(); err != nil {
		t.Fatalf("accept on a healthy pipeline: %v", err)
	}

	// The node goes down and stays down while the test keeps the fault armed.
	ctx, stopFault := context.WithCancel(context.Background())
	var faults sync.WaitGroup
	faults.Go(func() {
		for ctx.Err() == nil {
			if _, err := e.sim.InjectFault(tronsim.FaultNodeDown, 200, 0); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	defer func() { stopFault(); faults.Wait() }()
	stuck := e.order(account, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})

	// Creation refuses once the stuck order is older than the bound (orders accepted before
	// that wait as well), and charges nothing.
	deadline := time.Now().Add(20 * time.Second)
	var refused *apierr.Error
	for refused == nil {
		if time.Now().After(deadline) {
			t.Fatal("creation never refused while delivery was behind")
		}
		bal0, res0 := e.balance(account)
		_, id, err := accept() // accepted until the stuck order is older than the bound
		var ae *apierr.Error
		if errors.As(err, &ae) && ae.Code == apierr.DeliveryBacklogged {
			refused = ae
			if bal, res := e.balance(account); bal != bal0 || res != res0 {
				t.Fatalf("a refused creation moved the ledger: balance %d -> %d, reserved %d -> %d", bal0, bal, res0, res)
			}
			var n int
			if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM orders WHERE client_order_id = $1`, id).Scan(&n); err != nil || n != 0 {
				t.Fatalf("a refused creation stored %d orders (%v)", n, err)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if refused.RetryAfter <= 0 || !refused.Code.Retryable || refused.Code.Status != 503 {
		t.Fatalf("5050 answer %+v: want 503, retryable, with Retry-After", refused)
	}
	if r := status.Report(context.Background()); r.Delivery.Status != health.Degraded {
		t.Fatalf("status delivery %s while creation refuses, want degraded", r.Delivery.Status)
	}

	// The node answers again (the test stops re-arming; what is armed drains by itself).
	stopFault()
	faults.Wait()
	e.waitStatus(account, stuck.ID, 30*time.Second, orders.Active)
	deadline = time.Now().Add(30 * time.Second)
	for {
		a, _, err := accept()
		if err == nil {
			if len(a.Body) == 0 {
				t.Fatal("accepted without a body")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creation still refused after the backlog drained: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for r := status.Report(context.Background()); r.Delivery.Status != health.Operational; r = status.Report(context.Background()) {
		if time.Now().After(deadline) {
			age, _ := backlog.Behind()
			t.Fatalf("status delivery %s after recovery, want operational (oldest undelivered order %s old)", r.Delivery.Status, age)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.invariants()
}
