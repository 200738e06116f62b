package outbox_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/topics"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startBroker is the test's own embedded broker with the catalogue created. The outbox
// tests relay hand-made envelopes (order.updated with a sequence number), so the records
// are not checked against the event schemas.
func startBroker(t testing.TB) string { return testenv.Kafka(t, testenv.SyntheticPayloads) }

func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kafka.NewClient([]string{addr}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// orderEvent builds an order.created-style event for key with a sequence number.
func orderEvent(t testing.TB, key string, seq int) events.Envelope {
	t.Helper()
	env, err := events.New("order.updated", "acc_1", network.Mainnet, map[string]any{"order_id": key, "seq": seq})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// writeEvents commits one event per transaction (all in db when db is a transaction),
// cycling over keys, and returns the event ids per key in write order. Each key is written by this one goroutine, so id order is
// write order for every key (the package's ordering contract).
func writeEvents(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, keys []string, from, n int, perKey map[string][]string, after func(i int)) error {
	for i := from; i < from+n; i++ {
		key := keys[i%len(keys)]
		env, err := events.New("order.updated", "acc_1", network.Mainnet, map[string]any{"order_id": key, "seq": i})
		if err != nil {
			return err
		}
		if tx, ok := db.(pgx.Tx); ok {
			err = outbox.Insert(ctx, tx, env)
		} else {
			err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return outbox.Insert(ctx, tx, env) })
		}
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		perKey[key] = append(perKey[key], env.EventID)
		if after != nil {
			after(i)
		}
	}
	return nil
}

func keysN(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("ord_%02d", i)
	}
	return ks
}

// readOrderEvents consumes events.orders.v1 from the start until want distinct event ids
// arrived, and returns per key the event ids in first-occurrence order plus the number of
// duplicate deliveries.
func readOrderEvents(t *testing.T, addr string, want int, within time.Duration) (map[string][]string, int) {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topics.OrderEvents.Name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	seen := map[string]bool{}
	perKey := map[string][]string{}
	dups := 0
	for len(seen) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d events reached Kafka within %v", len(seen), want, within)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var id string
			for _, h := range r.Headers {
				if h.Key == outbox.HeaderEventID {
					id = string(h.Value)
				}
			}
			if seen[id] {
				dups++
				return
			}
			seen[id] = true
			perKey[string(r.Key)] = append(perKey[string(r.Key)], id)
		})
	}
	return perKey, dups
}

func assertKeyOrder(t *testing.T, written, read map[string][]string) {
	t.Helper()
	for k, w := range written {
		r := read[k]
		if len(r) != len(w) {
			t.Errorf("key %s: %d events on Kafka, %d written", k, len(r), len(w))
			continue
		}
		for i := range w {
			if r[i] != w[i] {
				t.Errorf("key %s: event %d on Kafka is %s, written %s (order broken)", k, i, r[i], w[i])
				break
			}
		}
	}
}

func unpublished(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
