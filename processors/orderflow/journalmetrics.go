package orderflow

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/metrics"
	"rental/infra/orderstore"
)

// journalMetrics reads the unsettled signer journal every interval into
// rental_signer_journal_entries{state} and rental_signer_journal_oldest_seconds{state}:
// entries stuck in "signed" are transactions the node has not accepted (a broadcast
// failing), entries stuck in "broadcast" are transactions no block has confirmed.
func (f *Flow) journalMetrics(ctx context.Context, interval time.Duration) {
	entries := metrics.Register(f.o.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rental_signer_journal_entries",
		Help: "Signer journal transactions whose fate is unknown, by state (signed, broadcast); every replica reads the same table, take max.",
	}, []string{"state"}))
	oldest := metrics.Register(f.o.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "rental_signer_journal_oldest_seconds",
		Help: "Age of the oldest signer journal transaction in a state (signed, broadcast); 0 when none.",
	}, []string{"state"}))
	metrics.Sample(ctx, interval, f.log, "the signer journal", func(ctx context.Context) error {
		st, err := orderstore.UnsettledJournal(ctx, f.o.Pool)
		if err != nil {
			return err
		}
		for state, b := range st {
			entries.WithLabelValues(state).Set(float64(b.Count))
			oldest.WithLabelValues(state).Set(b.Oldest.Seconds())
		}
		return nil
	})
}
