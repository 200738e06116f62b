// Command crediting credits deposits: it consumes chain facts (chain.facts.v1 on
// KAFKA_BROKERS) in consumer group "crediting" and credits TRX and USDT transfers to deposit
// addresses in the ledger (DATABASE_URL) once DEPOSIT_CONFIRMATIONS deep, emitting
// balance.credited through the outbox. Replicas scale up to the topic's partition count;
// every credit is exactly once per (tx hash, log index) whatever runs or crashes.
// With TREASURY_ADDRESS set it also runs the sweeping job (one replica is enough: open sweeps
// are unique per address, so a second sweeper only repeats node reads).
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
		log.Error("crediting failed", "stage", "crediting", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	pool, err := pg.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	reg := metrics.NewRegistry()
	consumer, err := stages.Crediting(cfg, pool, log, reg)
	if err != nil {
		return err
	}
	sweeper, err := stages.Sweeper(cfg, pool, log, reg)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return consumer.Run(gctx) })
	if sweeper != nil {
		g.Go(func() error { return sweeper.Run(gctx) })
	}
	g.Go(func() error { return metrics.Run(gctx, cfg.MetricsAddr, reg, log) })
	return g.Wait()
}
