package webhookdelivery_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/consumers/webhookdelivery"
	"rental/infra/testenv"
	"rental/infra/webhooks"
)

// Customers delete endpoints while the deliverer retries deliveries to them as fast as the
// schedule lets it (every answer is 500). Each Delete starts a moment after an answer, when
// the deliverer records that attempt: it updates the delivery's queue row and inserts a
// history row whose foreign key locks the endpoint, the moment a Delete used to deadlock
// with. Every Delete must succeed and the deliverer must meet no deadlock either; once a
// Delete has returned, its endpoint gets no attempt but the one per key already under
// way, and its events are dropped, not dead-lettered.
func TestDeletesRaceRetries(t *testing.T) {
	e := newEnv(t)
	const endpoints, keys = 40, 3
	type target struct {
		account, path, id string
		events            []string
		answered          chan struct{} // an answer after every key's first attempt
		deleted           time.Time     // when Delete returned
		took              time.Duration
		err               error
	}
	targets := make([]*target, endpoints)
	byPath := map[string]*target{}
	for i := range targets {
		tg := &target{account: newAccount(t, e.db), path: fmt.Sprintf("/race%d", i), answered: make(chan struct{}, 1)}
		var ep webhooks.Target
		if err := e.store.InTx(context.Background(), func(tx pgx.Tx) error {
			var err error
			ep, err = e.store.Create(context.Background(), tx, tg.account, webhooks.NewEndpoint{URL: e.rcv.url(tg.path)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		tg.id = ep.ID
		e.rcv.setSecret(tg.path, ep.Secret)
		targets[i], byPath[tg.path] = tg, tg
	}
	var mu sync.Mutex
	seen := map[string]map[string]bool{}
	e.rcv.Answer = func(r received) int {
		mu.Lock()
		if seen[r.Path] == nil {
			seen[r.Path] = map[string]bool{}
		}
		seen[r.Path][r.EventID] = true
		ready := len(seen[r.Path]) == keys
		mu.Unlock()
		if tg := byPath[r.Path]; ready && tg != nil {
			select {
			case tg.answered <- struct{}{}:
			default:
			}
		}
		return 500
	}
	logs := &testenv.LogBuffer{}
	d, err := webhookdelivery.New(webhookdelivery.Options{
		Brokers: []string{e.broker}, Store: e.store, Brand: testBrand, Delays: scaled(50 * time.Millisecond),
		Policy:     webhooks.Policy{AllowLoopback: true},
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(50 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("deliverer: %v", err)
		}
	}()

	for _, tg := range targets {
		for k := 0; k < keys; k++ {
			env, _ := e.publishOrder(t, tg.account, "order.confirmed", fmt.Sprintf("ord_race_%s_%d", tg.id, k), -1)
			tg.events = append(tg.events, env.EventID)
		}
	}
	var wg sync.WaitGroup
	for _, tg := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-tg.answered:
			case <-time.After(30 * time.Second):
				tg.err = fmt.Errorf("no answer after the first attempt of every key within 30 s")
				return
			}
			// The deliverer records the attempt 1 to 3 ms after the answer (it produces the
			// wake-up first): spread the Deletes over that window.
			time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond)
			start := time.Now()
			tg.err = e.store.Delete(context.Background(), tg.account, tg.id)
			tg.deleted = time.Now()
			tg.took = tg.deleted.Sub(start)
		}()
	}
	wg.Wait()
	var took []time.Duration
	for _, tg := range targets {
		if tg.err != nil {
			t.Errorf("Delete of %s: %v", tg.path, tg.err)
		}
		took = append(took, tg.took)
	}
	slices.Sort(took)
	t.Logf("%d Deletes, each within a few ms of an attempt being recorded: median %s, max %s",
		len(took), took[len(took)/2].Round(time.Microsecond), took[len(took)-1].Round(time.Microsecond))

	// The next retries were due 50 to 200 ms later: a delivery the Delete did not drop shows up
	// here.
	time.Sleep(1500 * time.Millisecond)
	late := map[string][]received{}
	for _, r := range e.rcv.requests() {
		if tg := byPath[r.Path]; tg != nil && !tg.deleted.IsZero() && r.At.After(tg.deleted) {
			late[r.Path] = append(late[r.Path], r)
		}
	}
	lateTotal := 0
	for _, tg := range targets {
		rs := late[tg.path]
		lateTotal += len(rs)
		// An attempt claimed before the Delete committed may reach the endpoint a moment
		// after Delete returned, once per key at most; nothing may follow it.
		if len(rs) > keys {
			t.Errorf("%s: %d requests after its Delete returned, want at most %d (one under way per key)", tg.path, len(rs), keys)
		}
		for _, r := range rs {
			if r.At.Sub(tg.deleted) > time.Second {
				t.Errorf("%s: %s attempt %d arrived %s after its Delete returned", tg.path, r.EventID, r.Attempt, r.At.Sub(tg.deleted))
			}
		}
	}
	t.Logf("%d requests were under way when their Delete returned", lateTotal)
	var queued int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_queue`).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if queued != 0 {
		t.Errorf("%d deliveries still queued after every endpoint was deleted", queued)
	}
	dead := e.deadLetters(t)
	for _, tg := range targets {
		for _, id := range tg.events {
			if _, ok := dead[id]; ok {
				t.Errorf("%s: event %s was dead-lettered (%v), want it dropped", tg.path, id, dead[id])
			}
		}
	}
	if l := logs.String(); strings.Contains(l, "40P01") {
		t.Errorf("the deliverer met a deadlock:\n%s", l)
	}
}
