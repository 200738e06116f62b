// Command webhooks delivers customer events to the accounts' webhook endpoints
// (consumers/webhooks): it reads the event topics and the retry topics from KAFKA_BROKERS
// and keeps delivery state in DATABASE_URL. Run several: each topic partition is handled
// by one replica at a time. SIGTERM stops it cleanly; after a SIGKILL the next replica
// redoes what was not committed (deliveries are at least once).
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
		log.Error("webhook deliverer failed", "stage", "webhooks", "err", err)
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
	// Creates the retry and dead-letter topics when missing.
	producer, err := stages.KafkaProducer(ctx, cfg)
	if err != nil {
		return err
	}
	producer.Close()

	reg := metrics.NewRegistry()
	deliverer, err := stages.WebhookDeliverer(cfg, pool, log, reg)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return deliverer.Run(gctx) })
	g.Go(func() error { return metrics.Run(gctx, cfg.MetricsAddr, reg, log) })
	return g.Wait()
}
