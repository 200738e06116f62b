// Command chainwatch follows the TRON chain (TRON_NODE_URL) CONFIRMATIONS blocks below the
// head and writes normalized chain facts to the outbox in Postgres (DATABASE_URL); the relay
// stage publishes them. One instance per network does the work; a second one is safe (its
// commits fail the cursor check) but only repeats node calls.
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
		log.Error("chainwatch failed", "stage", "chainwatch", "err", err)
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
	follower, err := stages.Chainwatch(cfg, pool, log, reg)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return follower.Run(gctx) })
	g.Go(func() error { return metrics.Run(gctx, cfg.MetricsAddr, reg, log) })
	return g.Wait()
}
