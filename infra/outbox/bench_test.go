package outbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/schemas/topics"
)

const benchBacklog = 5000

// BenchmarkRelay measures how fast one relay drains a committed backlog into the embedded
// broker (events/s). `make bench` sets it against BenchmarkDirectProduce, the same records
// produced straight to the same kind of broker, which is the relay's ceiling.
func BenchmarkRelay(b *testing.B) {
	db := testenv.Postgres(b)
	addr := startBroker(b)
	ctx := context.Background()
	keys := keysN(64)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			for j := range benchBacklog {
				if err := outbox.Insert(ctx, tx, orderEvent(b, keys[j%len(keys)], j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		stop := startRelay(b, db.URL, addr, outbox.RelayOptions{SweepEvery: 50 * time.Millisecond})
		eventually(b, time.Minute, "backlog drained", func() bool { return unpublished(b, db.Pool) == 0 })
		total += time.Since(start)
		stop()
	}
	b.ReportMetric(float64(benchBacklog*b.N)/total.Seconds(), "events/s")
}

// BenchmarkDirectProduce produces the same backlog straight to the broker in batches of the
// relay's default size, with the same client options: the reference for BenchmarkRelay.
func BenchmarkDirectProduce(b *testing.B) {
	addr := startBroker(b)
	cl := newClient(b, addr)
	keys := keysN(64)
	recs := make([]*kgo.Record, benchBacklog)
	for j := range recs {
		env := orderEvent(b, keys[j%len(keys)], j)
		v, err := json.Marshal(env)
		if err != nil {
			b.Fatal(err)
		}
		recs[j] = &kgo.Record{Topic: topics.OrderEvents.Name, Key: []byte(keys[j%len(keys)]), Value: v}
	}
	ctx := context.Background()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for j := 0; j < len(recs); j += 500 {
			batch := make([]*kgo.Record, 0, 500)
			for _, r := range recs[j:min(j+500, len(recs))] {
				batch = append(batch, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value})
			}
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(benchBacklog*b.N)/total.Seconds(), "events/s")
}
