package health

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rental/infra/testenv"
)

func TestWorst(t *testing.T) {
	cases := []struct {
		in   []Status
		want Status
	}{
		{nil, Operational},
		{[]Status{Operational, Operational}, Operational},
		{[]Status{Operational, Degraded, Operational}, Degraded},
		{[]Status{Degraded, Down, Operational}, Down},
		{[]Status{Operational, "bogus"}, Down},
	}
	for _, c := range cases {
		if got := Worst(c.in...); got != c.want {
			t.Errorf("Worst(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestJudgeDelivery(t *testing.T) {
	secs := func(n int64) *int64 { return &n }
	cases := []struct {
		name string
		w    DeliveryWindow
		want Status
	}{
		{"quiet hour", DeliveryWindow{}, Operational},
		{"two orders both failed are not judged", DeliveryWindow{Orders: 2, Failed: 2}, Operational},
		{"healthy", DeliveryWindow{Orders: 100, Failed: 2, MedianDeliverySeconds: secs(9)}, Operational},
		{"10% failed", DeliveryWindow{Orders: 10, Failed: 1, MedianDeliverySeconds: secs(9)}, Degraded},
		{"slow", DeliveryWindow{Orders: 10, MedianDeliverySeconds: secs(61)}, Degraded},
		{"half failed", DeliveryWindow{Orders: 4, Failed: 2}, Down},
	}
	for _, c := range cases {
		if got := judgeDelivery(c.w); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestPaymentsFollowsScannerCursorAge(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	c := NewChecker(Options{Database: NewPostgres(db.Pool), Supply: countingSupply{}})

	if p := c.payments(ctx); p.Status != Degraded || p.ScannerUpdatedSecondsAgo != nil {
		t.Fatalf("no cursor: %+v", p)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO chain_cursor (name, block_num, block_hash) VALUES ('chainwatch', 1, 'h')`); err != nil {
		t.Fatal(err)
	}
	// Another follower's cursor must not count.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO chain_cursor (name, block_num, block_hash, updated_at) VALUES ('other', 1, 'h', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	for _, c2 := range []struct {
		agoSeconds int
		want       Status
	}{{0, Operational}, {59, Operational}, {61, Degraded}, {299, Degraded}, {301, Down}} {
		if _, err := db.Pool.Exec(ctx, `UPDATE chain_cursor SET updated_at = now() - make_interval(secs => $1) WHERE name = 'chainwatch'`, c2.agoSeconds); err != nil {
			t.Fatal(err)
		}
		p := c.payments(ctx)
		if p.Status != c2.want || p.ScannerUpdatedSecondsAgo == nil || *p.ScannerUpdatedSecondsAgo != int64(c2.agoSeconds) {
			t.Errorf("%d s ago: status %s age %v, want %s", c2.agoSeconds, p.Status, deref(p.ScannerUpdatedSecondsAgo), c2.want)
		}
	}
	// A fresh cursor whose follower refuses its node (another chain, a head below the
	// cursor) credits nothing: degraded.
	if _, err := db.Pool.Exec(ctx, `UPDATE chain_cursor SET updated_at = now(), problem = 'the stored cursor is above the node''s head' WHERE name = 'chainwatch'`); err != nil {
		t.Fatal(err)
	}
	if p := c.payments(ctx); p.Status != Degraded {
		t.Errorf("with the follower's problem set: %s, want degraded", p.Status)
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// countingSupply counts calls and can hold them until released.
type countingSupply struct {
	calls *atomic.Int64
	gate  chan struct{}
}

func (s countingSupply) AvailableEnergy(context.Context) (int64, error) {
	if s.calls != nil {
		s.calls.Add(1)
	}
	if s.gate != nil {
		<-s.gate
	}
	return 1000, nil
}

// fakeDB is an always-healthy database for cache tests (the Postgres probes are tested
// against the real server above).
type fakeDB struct{}

func (fakeDB) Ping(context.Context) error { return nil }
func (fakeDB) ScannerAge(context.Context) (time.Duration, bool, error) {
	return time.Second, true, nil
}

func TestReportCachedAndComputedOnceUnderConcurrency(t *testing.T) {
	var calls atomic.Int64
	gate := make(chan struct{})
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewChecker(Options{Database: fakeDB{}, Supply: countingSupply{calls: &calls, gate: gate}})
	c.opts.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

	const callers = 20
	var wg sync.WaitGroup
	reports := make([]Report, callers)
	for i := range callers {
		wg.Go(func() { reports[i] = c.Report(context.Background()) })
	}
	// Hold the first computation until it is certainly running, then release it.
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond) // polling for the probe to start
	}
	close(gate)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d concurrent callers ran %d computations, want 1", callers, n)
	}
	for _, r := range reports {
		if r.Status != Operational || r.Supply.AvailableEnergy != 1000 {
			t.Fatalf("report %+v", r)
		}
	}

	mu.Lock()
	now = now.Add(9 * time.Second)
	mu.Unlock()
	c.Report(context.Background())
	if n := calls.Load(); n != 1 {
		t.Fatalf("within 10 s: %d computations, want the cached one", n)
	}

	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	r := c.Report(context.Background())
	if n := calls.Load(); n != 2 {
		t.Fatalf("after 10 s: %d computations, want 2", n)
	}
	if !r.AsOf.Equal(now) {
		t.Errorf("as_of %v, want the time of the new computation %v", r.AsOf, now)
	}
}
