package batchstage

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/stages"
	"rental/infra/stages/acceptstage"
	"rental/processors/batchflow"
)

// BatchFlow is the batch processor's logic placing orders through order acceptance,
// priced from the pricer's snapshots in Redis. The returned runner keeps the snapshot cache
// fed; run it next to the flow.
func BatchFlow(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger, reg prometheus.Registerer) (*batchflow.Flow, stages.Runner, error) {
	idem := idempotency.New(pool, idempotency.Options{})
	prices, snapshots, err := acceptstage.LivePrices(cfg, pool, rdb, log)
	if err != nil {
		return nil, nil, err
	}
	acc, err := acceptstage.Acceptance(cfg, pool, prices, nil, idem, log, nil)
	if err != nil {
		return nil, nil, err
	}
	f, err := batchflow.New(batchflow.Options{
		Pool:       pool,
		Placer:     acc,
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
	sec, err := stages.KafkaOpts(cfg)
	if err != nil {
		return nil, err
	}
	flow := stages.RunnerFunc(func(ctx context.Context) error {
		return f.Run(ctx, batchflow.RunOptions{Brokers: cfg.KafkaBrokers,
			ClientOpts: append(sec, kgo.SessionTimeout(cfg.Processor.SessionTimeout), kgo.HeartbeatInterval(cfg.Processor.SessionTimeout/5),
				kgo.RebalanceTimeout(cfg.Processor.SessionTimeout))})
	})
	return stages.Together(flow, snapshots), nil
}
