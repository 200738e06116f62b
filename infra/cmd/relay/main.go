// Command relay publishes the transactional outbox to Kafka. Run any number of replicas:
// they share the outbox's 16 shards through Postgres advisory locks and keep per-key
// order. Configuration: DATABASE_URL, KAFKA_BROKERS, OUTBOX_SWEEP_INTERVAL (see
// infra/config). It creates the catalogue's topics at start and stops on SIGINT/SIGTERM
// after finishing the batches in flight.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"rental/infra/config"
	"rental/infra/kafka"
	"rental/infra/outbox"
	"rental/infra/pg"
	"rental/schemas/topics"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("relay failed", "stage", "relay", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	pool, err := pg.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	producer, err := kafka.NewClient(cfg.KafkaBrokers)
	if err != nil {
		return err
	}
	defer producer.Close()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = kafka.EnsureTopics(tctx, kadm.NewClient(producer), topics.All())
	cancel()
	if err != nil {
		return fmt.Errorf("%w (brokers %v)", err, cfg.KafkaBrokers)
	}

	relay, err := outbox.NewRelay(outbox.RelayOptions{
		Pool:       pool,
		Producer:   producer,
		Logger:     log,
		SweepEvery: cfg.OutboxSweepEvery,
	})
	if err != nil {
		return err
	}
	return relay.Run(ctx)
}
