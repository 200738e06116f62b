package webhookdelivery

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/infra/testenv"
	"rental/infra/webhooks"
	"rental/schemas/topics"
)

// A retry partition whose head record is not due is paused (not fetched) until it is,
// and the poll loop keeps serving the other partitions meanwhile.
func TestRetryPartitionPausedUntilHeadIsDue(t *testing.T) {
	db := testenv.Postgres(t)
	broker := testenv.Kafka(t)
	store, err := webhooks.NewStore(db.Pool, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Brokers: []string{broker}, Store: store, Brand: "t",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ClientOpts: []kgo.Opt{kgo.FetchMaxWait(50 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Manual partitioning so the records land where the test looks.
	prod, err := kafka.NewClient([]string{broker}, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	topic := topics.WebhookRetry[0].Name
	produce := func(partition int32, due time.Time) {
		w := wakeup{step: step{EventID: "evt_none", Role: "primary", N: 2}, AccountID: "acc_none", OKey: "evt_none", DueMS: due.UnixMilli()}
		r := &kgo.Record{Topic: topic, Partition: partition, Value: w.value()}
		for k, v := range w.headers() {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	due := time.Now().Add(3 * time.Second)
	produce(4, due)
	paused := func() bool {
		d.retry.mu.Lock()
		cl := d.retry.cl
		d.retry.mu.Unlock()
		return cl != nil && slices.Contains(cl.PauseFetchPartitions(nil)[topic], 4)
	}
	deadline := time.Now().Add(2500 * time.Millisecond)
	for !paused() {
		if time.Now().After(deadline) {
			t.Fatal("the partition was not paused while its head waited")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Another partition's due record is handled meanwhile.
	produce(5, time.Now())
	w5 := func() int64 {
		d.retry.mu.Lock()
		defer d.retry.mu.Unlock()
		if w := d.retry.workers[tpart{topic, 5}]; w != nil {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.done
		}
		return -1
	}
	for w5() != 1 {
		if time.Now().After(due) {
			t.Fatal("a due record on another partition waited for the paused one")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !paused() {
		t.Fatal("partition 4 resumed before its head was due")
	}
	for paused() {
		if time.Now().After(due.Add(3 * time.Second)) {
			t.Fatal("partition 4 still paused well after its head was due")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if time.Now().Before(due) {
		t.Error("partition 4 resumed before its head was due")
	}
}
