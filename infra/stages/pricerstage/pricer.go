// Package pricerstage wires the pricer (processors/pricer) and its supply collector from
// configuration.
package pricerstage

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/config"
	"rental/infra/orderstore"
	"rental/infra/pricestore"
	"rental/infra/stages"
	"rental/infra/supply"
	"rental/infra/tron"
	"rental/processors/pricer"
	"rental/schemas/pricing"
)

// Supply is the pricer's supply collector from configuration: own pools, the providers of
// PROVIDER_URLS and, when DEEP_RESERVE_CONTRACT is set and a pool can act as caller, the
// deep reserve.
func Supply(cfg config.Config) *supply.Collector {
	node := tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(2*time.Second))
	c := &supply.Collector{
		DeepTiers: []pricing.Tier{pricing.Tier5m, pricing.Tier1h, pricing.Tier1d},
		MaxStale:  cfg.Pricing.MaxStale,
	}
	if cfg.Network.SellsOwnStake() {
		c.Pool = supply.NewPool(node, cfg.PoolAddresses)
	}
	for slug, url := range cfg.Pricing.Providers {
		c.Providers = append(c.Providers, supply.NewHTTPProvider(slug, url, nil))
	}
	if cfg.Network.SellsOwnStake() && !cfg.Pricing.DeepContract.IsZero() && len(cfg.PoolAddresses) > 0 {
		c.Deep = supply.NewDeepReserve(node, cfg.Pricing.DeepContract, cfg.PoolAddresses[0])
	}
	return c
}

// Pricer is the pricer stage: every PRICER_INTERVAL a snapshot to Postgres (the copy that
// outlives a Redis loss), to Redis (for the edge) and to the compacted market-data topic
// through producer.
func Pricer(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, producer *kgo.Client, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	store := pricestore.New(pool)
	return pricer.New(pricer.Options{
		Network:   cfg.Network,
		Models:    store,
		Snapshots: store,
		Supply:    Supply(cfg),
		Delivered: func(ctx context.Context, since time.Time) (int64, error) {
			return orderstore.DeliveredSince(ctx, pool, cfg.Network, since)
		},
		Producer:   producer,
		Redis:      rdb,
		Every:      cfg.Pricing.Every,
		Logger:     log.With("stage", "pricer"),
		Registerer: reg,
	})
}
