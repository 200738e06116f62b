package orderflow

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/orders"
	"rental/schemas/topics"
)

// A burst of orders goes through the group transactions (delivery, broadcast mark,
// confirmation of the chain facts of one block) and each order ends exactly as alone:
// active with its one delegation on the receiver, one order.confirmed naming it, one live
// journal row per fill, the charge captured, and the ledger invariants hold.
func TestBurstOfOrdersDeliveredAndConfirmedInGroups(t *testing.T) {
	const n = 40
	e := newEnv(t)
	ctx := context.Background()
	accs := []string{e.account(10_000), e.account(10_000), e.account(10_000)}
	receivers := make([]tron.Address, n)
	for i := range receivers {
		receivers[i] = e.receiver(true)
	}
	f := e.startFlowReturning()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.order(accs[i%len(accs)], orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: receivers[i]}).ID
	}
	for i, id := range ids {
		row := e.waitStatus(accs[i%len(accs)], id, 90*time.Second, orders.Active, orders.Failed)
		if row.Status != orders.Active || row.DeliveredAmount != 65_000 || len(row.DelegateHashes) != 1 {
			t.Fatalf("order %s: %+v", id, row.Record)
		}
		var journaled []string
		if err := e.db.Pool.QueryRow(ctx, `SELECT array_agg(txid) FROM signed_txs WHERE order_id = $1 AND purpose = 'delegate' AND state <> 'dropped'`,
			id).Scan(&journaled); err != nil {
			t.Fatal(err)
		}
		if len(journaled) != 1 || journaled[0] != row.DelegateHashes[0] {
			t.Fatalf("order %s: hashes %v, live journal rows %v", id, row.DelegateHashes, journaled)
		}
		evs := e.events(id)
		if len(evs) != 1 || evs[0].Event != orders.EventConfirmed {
			t.Fatalf("order %s: events %v, want one order.confirmed", id, evs)
		}
		if e.delegated(receivers[i], orders.Energy) <= 0 {
			t.Fatalf("order %s: nothing delegated to its receiver", id)
		}
	}
	for _, a := range accs {
		if _, res := e.balance(a); res != 0 {
			t.Fatalf("account %s still has %d SUN reserved", a, res)
		}
	}
	e.invariants()
	count := func(h interface{ Write(*dto.Metric) error }) (uint64, float64) {
		var m dto.Metric
		_ = h.Write(&m)
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
	}
	dn, ds := count(f.deliverGroupSize)
	mn, ms := count(f.markGroupSize)
	cn, cs := count(f.factGroupSize)
	t.Logf("groups: delivery %d for %.0f orders, marks %d for %.0f, confirmations %d for %.0f", dn, ds, mn, ms, cn, cs)
}

// The chain facts of many orders handled at the same moment (one block confirms them all)
// are applied and their orders confirmed together: each order active once, with one
// order.confirmed, its delegation verified on the receiver, each account charged exactly
// its orders' prices with its delivered energy counted, and the ledger invariants hold.
// The processor is driven through its handlers, as its consumers call them.
func TestFactsArrivingTogetherConfirmTheirOrdersTogether(t *testing.T) {
	const n = 24
	e := newEnv(t)
	ctx := context.Background()
	accs := []string{e.account(10_000), e.account(10_000), e.account(10_000)}
	f, err := New(Options{Pool: e.db.Pool, Node: e.node, Ledger: e.ledger, Network: e.net, Signers: e.signers(),
		LandGrace: time.Minute, RetryEvery: 200 * time.Millisecond, Confirmations: 1, Now: e.clock.Now, Logger: quiet(),
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.RegisterPools(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	ids := make([]string, n)
	accOf := map[string]string{}
	for i := range ids {
		acc := accs[i%len(accs)]
		ids[i] = e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: e.receiver(true)}).ID
		accOf[ids[i]] = acc
		v, _ := json.Marshal(orderstore.Intent{OrderID: ids[i], Kind: orderstore.IntentProcess})
		if err := f.HandleIntent(ctx, &kgo.Record{Value: v}); err != nil {
			t.Fatal(err)
		}
		row := e.waitStatus(acc, ids[i], time.Second, orders.Delegated)
		want[row.DelegateHashes[0]] = true
	}

	// The facts, as chainwatch wrote them.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers), kgo.ConsumeTopics(topics.ChainFacts.Name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for len(recs) < n {
		fs := cl.PollFetches(pctx)
		if pctx.Err() != nil {
			t.Fatalf("%d of %d chain facts after 60 s", len(recs), n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var fact events.ChainFact
			if json.Unmarshal(r.Value, &fact) == nil && fact.Kind == events.FactTxResult && want[fact.TxID] {
				delete(want, fact.TxID)
				recs = append(recs, r)
			}
		})
	}
	var wg sync.WaitGroup
	for _, r := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.HandleFact(ctx, r); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	charged := map[string]int64{}
	for _, id := range ids {
		row := e.waitStatus(accOf[id], id, 10*time.Second, orders.Active, orders.Failed)
		if row.Status != orders.Active || row.DeliveredAmount != 65_000 {
			t.Fatalf("order %s: %+v", id, row.Record)
		}
		if evs := e.events(id); len(evs) != 1 || evs[0].Event != orders.EventConfirmed {
			t.Fatalf("order %s: events %v, want one order.confirmed", id, evs)
		}
		charged[accOf[id]] += row.ChargedAmountSun
	}
	for _, acc := range accs {
		bal, res := e.balance(acc)
		var spent, energy int64
		if err := e.db.Pool.QueryRow(ctx, `SELECT spent_sun, energy_delegated FROM ledger_accounts WHERE account_id = $1`, acc).
			Scan(&spent, &energy); err != nil {
			t.Fatal(err)
		}
		if res != 0 || bal != 10_000*tron.SunPerTRX-charged[acc] || spent != charged[acc] || energy != int64(n/len(accs))*65_000 {
			t.Fatalf("account %s: balance %d, reserved %d, spent %d, energy delegated %d; want %d, 0, %d, %d", acc, bal, res, spent, energy,
				10_000*tron.SunPerTRX-charged[acc], charged[acc], n/len(accs)*65_000)
		}
	}
	e.invariants()
	var m dto.Metric
	_ = f.factGroupSize.Write(&m)
	t.Logf("%d orders confirmed in %d group transactions (the rest one by one)", int(m.GetHistogram().GetSampleSum()), m.GetHistogram().GetSampleCount())
	if m.GetHistogram().GetSampleCount() == 0 {
		t.Fatal("no chain facts were applied together although all arrived at once")
	}
}
