package orderflow

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/schemas/orders"
)

// journalGauge reads rental_signer_journal_<name>{state} from reg (-1 when absent).
func journalGauge(t *testing.T, reg *prometheus.Registry, name, state string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rental_signer_journal_"+name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == state {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// A delegation signed but never sent shows as one "signed" journal entry with its age; once
// a processor has sent it again and it landed, nothing is unsettled.
func TestSignerJournalMetrics(t *testing.T) {
	e := newEnv(t)
	acc := e.account(100)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: e.receiver(true)})

	reg := prometheus.NewRegistry()
	f, err := New(Options{Pool: e.db.Pool, Node: e.node, Ledger: e.ledger, Network: e.net, Signers: e.signers(), Logger: quiet(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.journalMetrics(ctx, 50*time.Millisecond)

	signUnsent(t, e, o.ID)
	waitUntil(t, 10*time.Second, "one signed entry, some time old", func() bool {
		return journalGauge(t, reg, "entries", "signed") == 1 && journalGauge(t, reg, "entries", "broadcast") == 0 &&
			journalGauge(t, reg, "oldest_seconds", "signed") > 0.1
	})
	if _, err := e.sim.Mine(25); err != nil { // its minute passes: the processor signs it again
		t.Fatal(err)
	}
	e.startFlow()
	if row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Active, orders.Failed); row.Status != orders.Active {
		t.Fatalf("order %s", row.Status)
	}
	waitUntil(t, 20*time.Second, "nothing unsettled", func() bool {
		return journalGauge(t, reg, "entries", "signed") == 0 && journalGauge(t, reg, "entries", "broadcast") == 0 &&
			journalGauge(t, reg, "oldest_seconds", "signed") == 0
	})
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
