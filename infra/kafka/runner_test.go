package kafka_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
)

// seen records what a handler processed, per partition, in handling order.
type seen struct {
	mu      sync.Mutex
	offsets map[int32][]int64
	values  map[string][]int // per key
	n       int
}

func newSeen() *seen { return &seen{offsets: map[int32][]int64{}, values: map[string][]int{}} }

func (s *seen) add(r *kgo.Record) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offsets[r.Partition] = append(s.offsets[r.Partition], r.Offset)
	v, _ := strconv.Atoi(string(r.Value))
	s.values[string(r.Key)] = append(s.values[string(r.Key)], v)
	s.n++
	return s.n
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *seen) partition(p int32) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.offsets[p])
}

// run starts the runner and returns a stop function that cancels it and waits for Run.
func run(t *testing.T, o kafka.RunnerOptions) (*kafka.Runner, func()) {
	t.Helper()
	r, err := kafka.NewRunner(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Error("Run did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return r, stop
}

func contiguous(offs []int64, from int64) bool {
	for i, o := range offs {
		if o != from+int64(i) {
			return false
		}
	}
	return true
}

func TestRunnerKeepsOrderAndResumesFromCommittedOffsets(t *testing.T) {
	b := startBroker(t)
	const topic, parts, total = "orders", int32(4), 400
	createTopic(t, b.Addr(), topic, parts)
	produce(t, newClient(t, b.Addr()), topic, 0, total, 8)

	// First member: stopped after ~150 records (a clean shutdown mid-stream).
	first := newSeen()
	_, stopFirst := run(t, testRunnerOpts(b.Addr(), "g", topic, func(_ context.Context, r *kgo.Record) error {
		first.add(r)
		return nil
	}))
	eventually(t, 20*time.Second, "first consumer processes 150 records", func() bool { return first.count() >= 150 })
	stopFirst()

	// Clean shutdown committed exactly what was processed.
	got := committed(t, b.Addr(), "g", topic, parts)
	for p := range parts {
		offs := first.partition(p)
		if !contiguous(offs, 0) {
			t.Fatalf("partition %d processed out of order: %v", p, offs)
		}
		if want := int64(len(offs)); got[p] != want && !(want == 0 && got[p] == -1) {
			t.Fatalf("partition %d: committed %d, processed up to %d", p, got[p], want)
		}
	}

	// The restarted member continues from the committed offsets: no gap, no repeat.
	second := newSeen()
	run(t, testRunnerOpts(b.Addr(), "g", topic, func(_ context.Context, r *kgo.Record) error {
		second.add(r)
		return nil
	}))
	eventually(t, 20*time.Second, "all records processed", func() bool { return first.count()+second.count() >= total })
	if n := first.count() + second.count(); n != total {
		t.Fatalf("processed %d records in all, want exactly %d", n, total)
	}
	for p := range parts {
		a, b := first.partition(p), second.partition(p)
		if !contiguous(b, int64(len(a))) {
			t.Errorf("partition %d: second consumer read %v after first read %d records", p, b, len(a))
		}
	}
	for k, vs := range first.values {
		all := append(slices.Clone(vs), second.values[k]...)
		if !slices.IsSorted(all) {
			t.Errorf("key %s handled out of order: %v", k, all)
		}
	}
}

func TestRunnerNeverCommitsPastAFailingRecord(t *testing.T) {
	b := startBroker(t)
	const topic = "failing"
	createTopic(t, b.Addr(), topic, 2)
	producer := newClient(t, b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for p := range int32(2) {
		for i := range 20 {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))})
		}
	}
	if err := producer.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var broken atomic.Bool
	broken.Store(true)
	var attempts atomic.Int64
	s := newSeen()
	o := testRunnerOpts(b.Addr(), "g", topic, func(_ context.Context, r *kgo.Record) error {
		if r.Partition == 0 && r.Offset == 5 && broken.Load() {
			attempts.Add(1)
			return errors.New("downstream unavailable")
		}
		s.add(r)
		return nil
	})
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	o.BufferSize = 4
	o.CommitEvery = 20 * time.Millisecond
	runner, _ := run(t, o)

	eventually(t, 20*time.Second, "healthy partition fully processed and committed while the other is stuck", func() bool {
		c := committed(t, b.Addr(), "g", topic, 2)
		return len(s.partition(1)) == 20 && c[1] == 20 && c[0] == 5 && attempts.Load() >= 5
	})
	if got := s.partition(0); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) {
		t.Fatalf("partition 0 went past the failing record: %v", got)
	}
	if c := committed(t, b.Addr(), "g", topic, 2); c[0] != 5 {
		t.Fatalf("committed offset %d on partition 0 while offset 5 keeps failing", c[0])
	}
	if paused := runner.PausedPartitions()[topic]; !slices.Contains(paused, 0) {
		t.Fatalf("partition 0 with a full buffer is not paused: %v", paused)
	}
	if n := counterValue(t, reg, "rental_kafka_handler_errors_total"); n < 5 {
		t.Fatalf("handler error metric = %v, want >= 5", n)
	}

	broken.Store(false)
	eventually(t, 20*time.Second, "stuck partition recovers and commits", func() bool {
		return len(s.partition(0)) == 20 && committed(t, b.Addr(), "g", topic, 2)[0] == 20
	})
	if got := s.partition(0); !contiguous(got, 0) {
		t.Fatalf("partition 0 after recovery: %v", got)
	}
	eventually(t, 5*time.Second, "partition resumed", func() bool { return len(runner.PausedPartitions()[topic]) == 0 })
	if n := counterValue(t, reg, "rental_kafka_records_processed_total"); n != 40 {
		t.Fatalf("processed metric = %v, want 40", n)
	}
}

func TestRunnerCommitsOnRevoke(t *testing.T) {
	b := startBroker(t)
	const topic, parts = "revoke", int32(4)
	createTopic(t, b.Addr(), topic, parts)
	producer := newClient(t, b.Addr())
	produce(t, producer, topic, 0, 100, 16)

	var mu sync.Mutex
	count := map[int]int{} // value -> times handled, across both members
	secondGotOld := []int{}
	handler := func(isSecond bool) kafka.Handler {
		return func(_ context.Context, r *kgo.Record) error {
			v, _ := strconv.Atoi(string(r.Value))
			mu.Lock()
			defer mu.Unlock()
			count[v]++
			if isSecond && v < 100 {
				secondGotOld = append(secondGotOld, v)
			}
			return nil
		}
	}
	handled := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(count)
	}
	// Periodic commits are effectively off: only the revoke path can commit.
	oa := testRunnerOpts(b.Addr(), "g", topic, handler(false))
	oa.CommitEvery = time.Hour
	run(t, oa)
	eventually(t, 20*time.Second, "first member handles the backlog", func() bool { return handled() == 100 })

	ob := testRunnerOpts(b.Addr(), "g", topic, handler(true))
	ob.CommitEvery = time.Hour
	run(t, ob)
	eventually(t, 20*time.Second, "revoked partitions committed", func() bool {
		n := 0
		for _, c := range committed(t, b.Addr(), "g", topic, parts) {
			if c > 0 {
				n++
			}
		}
		return n > 0
	})

	produce(t, producer, topic, 100, 100, 16)
	eventually(t, 20*time.Second, "both members handle new records", func() bool { return handled() == 200 })
	mu.Lock()
	defer mu.Unlock()
	if len(secondGotOld) > 0 {
		t.Fatalf("second member re-handled %d records the first had processed: revoke did not commit", len(secondGotOld))
	}
	for v, c := range count {
		if c != 1 {
			t.Errorf("record %d handled %d times", v, c)
		}
	}
}

func counterValue(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// With KeyConcurrency, records of one partition with different keys are handled at once,
// never two of one key, each key's in order; the committed offset never passes a record
// still failing, whatever was handled after it.
func TestRunnerHandlesDistinctKeysOfAPartitionAtOnce(t *testing.T) {
	b := startBroker(t)
	const topic, total, keys = "facts", 200, 8
	createTopic(t, b.Addr(), topic, 1)
	produce(t, newClient(t, b.Addr()), topic, 0, total, keys)

	got := newSeen()
	var mu sync.Mutex
	busy := map[string]bool{}
	var inFlight, most int
	var release atomic.Bool
	var twice atomic.Int32
	o := testRunnerOpts(b.Addr(), "g", topic, func(_ context.Context, r *kgo.Record) error {
		if string(r.Value) == "50" && !release.Load() {
			return errors.New("not yet")
		}
		mu.Lock()
		if busy[string(r.Key)] {
			twice.Add(1)
		}
		busy[string(r.Key)] = true
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		got.add(r)
		mu.Lock()
		busy[string(r.Key)] = false
		inFlight--
		mu.Unlock()
		return nil
	})
	o.KeyConcurrency = keys
	o.CommitEvery = 20 * time.Millisecond
	_, stop := run(t, o)
	eventually(t, 20*time.Second, "the records before and beside the failing one", func() bool { return got.count() >= 50 })
	time.Sleep(300 * time.Millisecond) // commits run meanwhile
	if c := committed(t, b.Addr(), "g", topic, 1)[0]; c > 50 {
		t.Fatalf("committed offset %d while record 50 still fails", c)
	}
	release.Store(true)
	eventually(t, 20*time.Second, "every record", func() bool { return got.count() >= total })
	stop()
	if c := committed(t, b.Addr(), "g", topic, 1)[0]; c != total {
		t.Fatalf("committed offset %d after every record, want %d", c, total)
	}
	if got.count() != total {
		t.Fatalf("handled %d records, want exactly %d", got.count(), total)
	}
	if twice.Load() > 0 {
		t.Fatalf("two records of one key handled at once %d times", twice.Load())
	}
	if most < 2 {
		t.Fatalf("at most %d record handled at once, want records of different keys together", most)
	}
	for k, vs := range got.values {
		if !slices.IsSorted(vs) {
			t.Errorf("key %s handled out of order: %v", k, vs)
		}
	}
}
