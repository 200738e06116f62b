// Command edge serves the public API (rental-api-v1) on HTTP_ADDR and Prometheus metrics on
// METRICS_ADDR. It is stateless; run as many replicas as traffic needs behind a load
// balancer. SIGINT or SIGTERM stops accepting, drains in-flight requests for SHUTDOWN_GRACE
// and exits. API_KEY_MASTER_KEY and DEPOSIT_HD_KEY are required (see README).
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
	"rental/infra/redisx"
	"rental/infra/stages"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("edge failed", "stage", "edge", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cfg, err := config.Load()
	if err != nil {
		return err
	}
	pool, err := pg.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err // names the fix (start Postgres or set DATABASE_URL)
	}
	defer pool.Close()
	rdb, err := redisx.Connect(ctx, cfg.RedisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()

	reg := metrics.NewRegistry()
	srv, err := stages.Edge(cfg, pool, rdb, log, reg)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error { return metrics.Run(gctx, cfg.MetricsAddr, reg, log.With("stage", "edge")) })
	return g.Wait()
}
