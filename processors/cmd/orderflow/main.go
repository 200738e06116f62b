// Command orderflow runs the order processor: it consumes order intents and chain facts and
// sweeps due orders (expiry, confirmation deadlines, retries), moving each order from
// created to active and on to expired or reclaimed, or to failed with the charge reversed.
// Run several replicas: they share the consumer groups and the due-order sweep, and every
// step is applied once under the order's row lock.
//
// Support tooling (audited):
//
//	orderflow refund <order id> <reason> [actor]   reason: incident_credit, dispute,
//	                                                partial_delivery, support_adjustment
//
// Configuration: the common variables (docs in README.md) plus POOL_KEYS, the stake pools'
// private keys.
package main

import (
	"context"
	"encoding/json"
	"errors"
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
	if err := run(log, os.Args[1:]); err != nil {
		log.Error("orderflow failed", "stage", "orderflow", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, args []string) error {
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
	reg := metrics.NewRegistry()

	if len(args) > 0 {
		if args[0] != "refund" || len(args) < 3 || len(args) > 4 {
			return errors.New("usage: orderflow [refund <order id> <reason> [actor]]")
		}
		actor := "support"
		if len(args) == 4 {
			actor = args[3]
		}
		f, err := stages.OrderFlow(cfg, pool, log, reg)
		if err != nil {
			return err
		}
		row, err := f.SupportRefund(ctx, args[1], args[2], actor)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(row.Record)
	}

	p, err := stages.Processor(cfg, pool, log, reg)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.Run(gctx) })
	g.Go(func() error { return metrics.Run(gctx, cfg.MetricsAddr, reg, log) })
	return g.Wait()
}
