package chainwatch

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/kafka"
	"rental/infra/outbox"
)

// startOutbox runs the real outbox relay in-process, publishing what the follower commits
// to the broker at addr until the test ends, and returns the writer the follower uses.
func startOutbox(t testing.TB, pool *pgxpool.Pool, addr string) OutboxWriter {
	t.Helper()
	producer, err := kafka.NewClient([]string{addr})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewRelay(outbox.RelayOptions{
		Pool: pool, Producer: producer, Logger: quietLogger(), Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
		producer.Close()
	})
	return outbox.InsertRecord
}
