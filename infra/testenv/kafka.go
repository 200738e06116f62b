package testenv

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

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
