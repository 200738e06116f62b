package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/outbox"
	"rental/infra/testenv"
)

// startRelay runs a relay in this process with its own pool and producer.
func startRelay(t testing.TB, dbURL, addr string, o outbox.RelayOptions) func() {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	o.Pool = pool
	o.Producer = newClient(t, addr)
	o.Logger = quietLogger()
	o.Registerer = prometheus.NewRegistry()
	r, err := outbox.NewRelay(o)
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
			if err := <-done; err != nil {
				t.Errorf("relay: %v", err)
			}
			pool.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

// Two relays at once, woken only by notifications (the sweep is effectively off), keep
// every key's order and lose nothing.
func TestTwoRelaysKeepPerKeyOrder(t *testing.T) {
	db := testenv.Postgres(t)
	addr := startBroker(t)
	o := outbox.RelayOptions{SweepEvery: time.Hour, BatchSize: 50}
	startRelay(t, db.URL, addr, o)
	startRelay(t, db.URL, addr, o)

	const n = 1000
	ctx := context.Background()
	keys := keysN(12)
	written := map[string][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Three writers on disjoint keys, concurrently, like independent orders.
	for w := range 3 {
		wg.Go(func() {
			mine := keys[w*4 : w*4+4]
			local := map[string][]string{}
			if err := writeEvents(ctx, db.Pool, mine, 0, n/3, local, nil); err != nil {
				t.Error(err)
			}
			mu.Lock()
			for k, v := range local {
				written[k] = v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	total := 3 * (n / 3)
	read, dups := readOrderEvents(t, addr, total, 30*time.Second)
	assertKeyOrder(t, written, read)
	if dups != 0 {
		t.Errorf("%d duplicates without any crash", dups)
	}
	eventually(t, 10*time.Second, "every row marked published", func() bool { return unpublished(t, db.Pool) == 0 })
}

// Throughput of one relay draining a backlog; the figure is logged, not asserted.
func TestRelayDrainsBacklog(t *testing.T) {
	db := testenv.Postgres(t)
	addr := startBroker(t)
	ctx := context.Background()
	const n = 5000
	keys := keysN(64)
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for i := range n {
			if err := outbox.Insert(ctx, tx, orderEvent(t, keys[i%len(keys)], i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	startRelay(t, db.URL, addr, outbox.RelayOptions{SweepEvery: 100 * time.Millisecond})
	eventually(t, 30*time.Second, "backlog drained", func() bool { return unpublished(t, db.Pool) == 0 })
	el := time.Since(start)
	t.Logf("relay drained %d events in %v: %.0f events/s", n, el.Round(time.Millisecond), float64(n)/el.Seconds())
	readOrderEvents(t, addr, n, 30*time.Second)
}
