// Command edge serves the public API (rental-api-v1) on HTTP_ADDR and Prometheus metrics on
// METRICS_ADDR. It is stateless; run as many replicas as traffic needs behind a load
// balancer. SIGINT or SIGTERM stops accepting, drains in-flight requests for SHUTDOWN_GRACE
// and exits.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/health"
	"rental/infra/pg"
	"rental/infra/tron"
)

func main() {
	base := slog.New(slog.NewTextHandler(os.Stderr, nil))
	log := base.With("stage", "edge")
	if err := run(base, log); err != nil {
		log.Error("edge failed", "err", err)
		os.Exit(1)
	}
}

func run(base, log *slog.Logger) error {
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

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	node := tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(2*time.Second))
	checker := health.NewChecker(health.Options{
		Database: health.NewPostgres(pool),
		Supply:   health.NewNodeSupply(node, cfg.PoolAddresses),
		Logger:   log,
		// Delivery: issue 6 passes the orders-table implementation here.
	})

	srv, err := edge.New(edge.Options{
		Logger:        base,
		Registerer:    reg,
		Network:       cfg.Network,
		Addr:          cfg.HTTPAddr,
		Status:        checker,
		ShutdownGrace: cfg.ShutdownGrace,
	})
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error { return edge.RunMetrics(gctx, cfg.MetricsAddr, reg, log) })
	err = g.Wait()
	if err == nil {
		log.Info("edge exited cleanly")
	}
	return err
}
