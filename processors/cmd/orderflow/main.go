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
// Configuration: the common variables (docs in README.md) plus POOL_ADDRESSES and
// SIGNER_KEYS, keys holding only a delegate permission of the pools (docs/custody.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"

	"rental/infra/config"
	"rental/infra/metrics"
	"rental/infra/pg"
	"rental/infra/stages"
	"rental/infra/stages/orderflowstage"
)

func main() {
	if len(os.Args) > 1 {
		if err := refund(os.Args[1:]); err != nil {
			slog.Error("orderflow refund failed", "err", err)
			os.Exit(1)
		}
		return
	}
	stages.Main("orderflow", func(p *stages.Process) (stages.Runner, error) {
		return orderflowstage.Processor(p.Cfg, p.Pool, p.Log, p.Reg)
	})
}

// refund is the support refund command; it prints the refunded order record.
func refund(args []string) error {
	if args[0] != "refund" || len(args) < 3 || len(args) > 4 {
		return errors.New("usage: orderflow [refund <order id> <reason> [actor]]")
	}
	actor := "support"
	if len(args) == 4 {
		actor = args[3]
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx := context.Background()
	pool, err := pg.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	f, err := orderflowstage.OrderFlow(ctx, cfg, pool, slog.Default(), metrics.NewRegistry())
	if err != nil {
		return err
	}
	row, err := f.SupportRefund(ctx, args[1], args[2], actor)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(row.Record)
}
