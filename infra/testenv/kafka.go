package testenv

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/schemas/topics"
)

// Kafka starts an embedded broker (franz-go kfake) for the test on a free 127.0.0.1 port,
// reached over TCP like any Kafka cluster, with every catalogue topic created; it returns
// the broker address. Each test gets its own broker, so topic names need no prefix.
func Kafka(t testing.TB) string {
	t.Helper()
	b, err := kafka.StartBroker(kafka.BrokerOptions{
		Addr:    "127.0.0.1:0",
		DataDir: t.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	cl, err := kafka.NewClient([]string{b.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, kadm.NewClient(cl), topics.All()); err != nil {
		t.Fatal(err)
	}
	return b.Addr()
}

// DeadLettered reads topics.ConsumersDead on broker from the start until it holds at least
// n records or 20 s passed, and returns what it read: each record with its headers as a map.
func DeadLettered(t testing.TB, broker string, n int) []DeadRecord {
	t.Helper()
	cl, err := kafka.NewClient([]string{broker}, kgo.ConsumeTopics(topics.ConsumersDead.Name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []DeadRecord
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			out = append(out, DeadRecord{Key: string(r.Key), Value: string(r.Value), Headers: h})
		})
	}
	return out
}

// DeadRecord is a record read from the dead-letter topic.
type DeadRecord struct {
	Key, Value string
	Headers    map[string]string
}
