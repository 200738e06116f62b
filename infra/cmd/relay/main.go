// Command relay publishes committed outbox rows to Kafka (KAFKA_BROKERS) from Postgres
// (DATABASE_URL). Run two or more: rows are sharded by key and each shard is held by one
// relay at a time, so per-key order survives a failover. SIGTERM stops it cleanly.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sync/errgroup"

	"rental/infra/config"
	"rental/infra/metrics"
	"rental/infra/pg"
	"rental/infra/stages"
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
	producer, err := stages.KafkaProducer(ctx, cfg)
	if err != nil {
		return err
	}
	defer producer.Close()

	reg := metrics.NewRegistry()
	relay, err := stages.Relay(cfg, pool, producer, log, reg)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return relay.Run(gctx) })
	g.Go(func() error { return metrics.Run(gctx, cfg.MetricsAddr, reg, log) })
	return g.Wait()
}
