package kafka_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/schemas/topics"
)

// readDead returns the records on the dead-letter topic once there are at least n.
func readDead(t *testing.T, addr string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topics.ConsumersDead.Name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("found %d dead-lettered records, want %d", len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func deadLettered(t *testing.T, reg *prometheus.Registry, consumer string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rental_consumer_dead_lettered_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "consumer" && l.GetValue() == consumer {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no rental_consumer_dead_lettered_total{consumer=%q}", consumer)
	return 0
}

// A record its handler calls unprocessable is written to the dead-letter topic with its
// source and the error, and only then committed past: while the dead-letter topic cannot
// take it, the partition stays on it; once it is stored, the next records are processed.
func TestRunnerDeadLettersAnUnprocessableRecordThenMovesOn(t *testing.T) {
	b := startBroker(t)
	const topic = "work"
	createTopic(t, b.Addr(), topic, 1)
	prod := newClient(t, b.Addr())
	var rs []*kgo.Record
	for i := range 5 {
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "event_id", Value: []byte("evt_" + strconv.Itoa(i))}}})
	}
	rs[2].Value = []byte("not a number")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var handled []string
	o := testRunnerOpts(b.Addr(), "dl", topic, func(_ context.Context, r *kgo.Record) error {
		if _, err := strconv.Atoi(string(r.Value)); err != nil {
			return kafka.Unprocessable(err)
		}
		mu.Lock()
		handled = append(handled, string(r.Value))
		mu.Unlock()
		return nil
	})
	// Fail fast while the dead-letter topic is missing, so the record is retried.
	o.ClientOpts = append(o.ClientOpts, kgo.UnknownTopicRetries(0))
	o.CommitEvery = 50 * time.Millisecond
	reg := o.Registerer.(*prometheus.Registry)
	run(t, o)

	got := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), handled...) }
	eventually(t, 20*time.Second, "records before the bad one handled", func() bool { return len(got()) >= 2 })
	time.Sleep(500 * time.Millisecond)
	if h := got(); len(h) != 2 {
		t.Fatalf("handled %v while the bad record could not be dead-lettered; want only 0 and 1", h)
	}
	if c := committed(t, b.Addr(), "dl", topic, 1); c[0] > 2 {
		t.Fatalf("committed offset %d passes the record that is not dead-lettered yet", c[0])
	}

	adm := kadm.NewClient(newClient(t, b.Addr()))
	if err := kafka.EnsureTopics(ctx, adm, []topics.Topic{topics.ConsumersDead}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the consumer moves on past the bad record", func() bool { return len(got()) == 4 })
	if h := got(); h[2] != "3" || h[3] != "4" {
		t.Fatalf("handled %v", h)
	}
	eventually(t, 20*time.Second, "offset committed past every record", func() bool { return committed(t, b.Addr(), "dl", topic, 1)[0] == 5 })

	dead := readDead(t, b.Addr(), 1)
	if len(dead) != 1 {
		t.Fatalf("%d dead-lettered records, want 1", len(dead))
	}
	d := dead[0]
	if string(d.Value) != "not a number" || string(d.Key) != "k" {
		t.Errorf("dead-lettered %q/%q, want the record as read", d.Key, d.Value)
	}
	for k, want := range map[string]string{
		kafka.HeaderDeadSourceTopic: topic, kafka.HeaderDeadSourcePartition: "0", kafka.HeaderDeadSourceOffset: "2",
		kafka.HeaderDeadConsumer: "dl", "event_id": "evt_2",
	} {
		if got := header(d, k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if e := header(d, kafka.HeaderDeadError); e == "" {
		t.Error("no error header")
	}
	if n := deadLettered(t, reg, "dl"); n != 1 {
		t.Errorf("rental_consumer_dead_lettered_total = %v, want 1", n)
	}
	if !kafka.IsUnprocessable(errors.Join(errors.New("x"), kafka.Unprocessable(nil))) || kafka.IsUnprocessable(errors.New("x")) {
		t.Error("IsUnprocessable does not see through wrapping")
	}
}
