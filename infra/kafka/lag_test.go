package kafka_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lagSeries reads rental_kafka_consumer_lag_records from reg, by partition label.
func lagSeries(t *testing.T, reg *prometheus.Registry, group string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "rental_kafka_consumer_lag_records" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] == group {
				out[labels["partition"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// An operator sees the records a stuck partition holds back, per partition, and the lag
// falls to zero once the partition moves; a stopped member reports nothing.
func TestRunnerReportsLagPerPartition(t *testing.T) {
	b := startBroker(t)
	const topic = "lagged"
	createTopic(t, b.Addr(), topic, 2)
	cl := newClient(t, b.Addr())
	produce(t, cl, topic, 0, 40, 8)
	ends := endOffsets(t, b.Addr(), topic)

	var release atomic.Bool
	o := testRunnerOpts(b.Addr(), "lag", topic, func(_ context.Context, r *kgo.Record) error {
		if r.Partition == 0 && !release.Load() {
			return errors.New("stuck")
		}
		return nil
	})
	o.LagEvery = 50 * time.Millisecond
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	_, stop := run(t, o)

	eventually(t, 20*time.Second, "partition 0 lags by all its records, partition 1 by none", func() bool {
		l := lagSeries(t, reg, "lag")
		return l["0"] == float64(ends[0]) && l["1"] == 0 && len(l) == 2
	})
	if ends[0] == 0 || ends[1] == 0 {
		t.Fatalf("records should be on both partitions: %v", ends)
	}
	release.Store(true)
	eventually(t, 20*time.Second, "partition 0 catches up", func() bool {
		l := lagSeries(t, reg, "lag")
		return l["0"] == 0 && l["1"] == 0
	})
	stop()
	if l := lagSeries(t, reg, "lag"); len(l) != 0 {
		t.Errorf("a stopped member still reports lag: %v", l)
	}
}

// endOffsets returns the end offset of each partition of topic.
func endOffsets(t *testing.T, addr, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, ps := range ends {
		for p, o := range ps {
			out[p] = o.Offset
		}
	}
	return out
}
