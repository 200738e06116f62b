package batchstage

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/stages"
	"rental/infra/stages/acceptstage"
	"rental/infra/tron"
	"rental/processors/batchflow"
	"rental/schemas/pricing"
)

// BatchPlacer adapts the edge's order placement (edge.Orders.PlaceTx: every check and the
// charge of POST /v1/orders) to the batch processor's Placer.
type BatchPlacer struct{ Orders *edge.Orders }

// Place implements batchflow.Placer.
func (b BatchPlacer) Place(ctx context.Context, tx pgx.Tx, accountID string, p batchflow.Placement) (string, error) {
	addr, err := tron.ParseAddress(p.Receiver)
	if err != nil {
		return "", err // stored by the edge after validation: never happens
	}
	batchID := p.BatchID
	rec, err := b.Orders.PlaceTx(ctx, tx, accountID, edge.Placement{
		ClientOrderID: p.ClientOrderID, Resource: pricing.Resource(p.Resource), Amount: p.Amount, Tier: pricing.Tier(p.Tier),
		Receiver: addr, Activate: p.Activate, MaxPriceSun: p.MaxPriceSun, BatchID: &batchID,
	})
	if errors.Is(err, edge.ErrPlacedBefore) {
		return "", batchflow.ErrPlacedBefore
	}
	if err != nil {
		return "", err
	}
	return rec.ID, nil
}

// BatchFlow is the batch processor's logic placing orders through the edge's order module,
// priced from the pricer's snapshots in Redis. The returned runner keeps the snapshot cache
// fed; run it next to the flow.
func BatchFlow(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger, reg prometheus.Registerer) (*batchflow.Flow, stages.Runner, error) {
	idem := idempotency.New(pool, idempotency.Options{})
	pricingAPI, snapshots, err := acceptstage.PricingModule(cfg, pool, rdb, idem, log)
	if err != nil {
		return nil, nil, err
	}
	ordersAPI, err := acceptstage.OrdersModule(cfg, pool, pricingAPI, nil, idem, log, nil)
	if err != nil {
		return nil, nil, err
	}
	f, err := batchflow.New(batchflow.Options{
		Pool:       pool,
		Placer:     BatchPlacer{Orders: ordersAPI},
		Workers:    cfg.Batches.Workers,
		PlaceEvery: cfg.Batches.PlaceEvery,
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		return nil, nil, err
	}
	return f, snapshots, nil
}

// Batches is the batch processor stage: pending receivers claimed with SKIP LOCKED, and
// order outcomes as one member of the batchflow.orders consumer group.
func Batches(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	f, snapshots, err := BatchFlow(cfg, pool, rdb, log, reg)
	if err != nil {
		return nil, err
	}
	flow := stages.RunnerFunc(func(ctx context.Context) error {
		return f.Run(ctx, batchflow.RunOptions{Brokers: cfg.KafkaBrokers,
			ClientOpts: []kgo.Opt{kgo.SessionTimeout(cfg.Processor.SessionTimeout), kgo.HeartbeatInterval(cfg.Processor.SessionTimeout / 5),
				kgo.RebalanceTimeout(cfg.Processor.SessionTimeout)}})
	})
	return stages.Together(flow, snapshots), nil
}
