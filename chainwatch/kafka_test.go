package chainwatch

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/infra/testenv"
	"rental/schemas/events"
	"rental/schemas/topics"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startBroker is the test's own embedded broker with the catalogue created.
func startBroker(t testing.TB) string { return testenv.Kafka(t) }

// factReader consumes chain.facts.v1 over TCP from the start, as a data team's consumer
// would, and keeps every fact with the key and partition it arrived with.
type factReader struct {
	t     testing.TB
	addr  string
	mu    sync.Mutex
	facts []events.ChainFact
}

func readFacts(t testing.TB, addr string) *factReader {
	t.Helper()
	cl, err := kafka.NewClient([]string{addr},
		kgo.ConsumeTopics(topics.ChainFacts.Name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	r := &factReader{t: t, addr: addr}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(rec *kgo.Record) {
				var f events.ChainFact
				if err := json.Unmarshal(rec.Value, &f); err != nil {
					t.Errorf("record at %d/%d is not a ChainFact: %v", rec.Partition, rec.Offset, err)
					return
				}
				if string(rec.Key) != f.TxID {
					t.Errorf("fact %s keyed %q, want its tx id", f.FactID, rec.Key)
				}
				r.mu.Lock()
				r.facts = append(r.facts, f)
				r.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return r
}

func (r *factReader) snapshot() []events.ChainFact {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.ChainFact(nil), r.facts...)
}

// waitCount waits until exactly n facts are on the topic: n consumed, and the topic's end
// offsets add up to n (so no extra record is in flight to the reader).
func (r *factReader) waitCount(n int, what string) []events.ChainFact {
	r.t.Helper()
	cl, err := kafka.NewClient([]string{r.addr})
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitFor(r.t, 20*time.Second, what, func() (bool, error) {
		if len(r.snapshot()) < n {
			return false, nil
		}
		ends, err := adm.ListEndOffsets(context.Background(), topics.ChainFacts.Name)
		if err != nil {
			return false, err
		}
		var total int64
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if total > int64(n) {
			r.t.Fatalf("%s: %d records on the topic, want %d: %+v", what, total, n, r.snapshot())
		}
		return total == int64(n) && len(r.snapshot()) == n, nil
	})
	return r.snapshot()
}
