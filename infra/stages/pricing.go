package stages

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"rental/edge"
	"rental/infra/acceptance"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/orderstore"
	"rental/infra/pricestore"
	"rental/infra/quotes"
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

// Pricer is the pricer stage: every PRICER_INTERVAL a snapshot to Redis (for the edge) and
// to the compacted market-data topic through producer.
func Pricer(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, producer *kgo.Client, log *slog.Logger, reg prometheus.Registerer) (Runner, error) {
	return pricer.New(pricer.Options{
		Network: cfg.Network,
		Models:  pricestore.New(pool),
		Supply:  Supply(cfg),
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

// livePrices is the live pricer shared by the edge's pricing endpoints and order
// acceptance, and the snapshot source feeding it. The source must run for as long as the
// prices are used.
func livePrices(cfg config.Config, rdb *redis.Client, log *slog.Logger) (*acceptance.Prices, *pricer.RedisSource, error) {
	src := pricer.NewRedisSource(rdb, pricer.SourceOptions{Network: cfg.Network, Logger: log})
	prices, err := acceptance.NewPrices(acceptance.PricesOptions{
		Network:   cfg.Network,
		Snapshots: src,
		Chain:     tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(2*time.Second)),
		Logger:    log,
	})
	if err != nil {
		return nil, nil, err
	}
	return prices, src, nil
}

// pricingModule is the edge's pricing endpoints over the live prices.
func pricingModule(pool *pgxpool.Pool, prices *acceptance.Prices, idem *idempotency.Store, log *slog.Logger) (*edge.Pricing, error) {
	return edge.NewPricing(edge.PricingOptions{
		Prices:      prices,
		Quotes:      quotes.New(pool),
		Idempotency: idem,
		Logger:      log,
	})
}

// together runs several runners until the first fails or ctx ends; the edge uses it to
// keep its in-memory caches fed for as long as it serves.
type together []Runner

func (t together) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range t {
		g.Go(func() error { return r.Run(gctx) })
	}
	return g.Wait()
}

// Together runs the non-nil runners as one (see together).
func Together(rs ...Runner) Runner {
	var t together
	for _, r := range rs {
		if r != nil {
			t = append(t, r)
		}
	}
	return t
}

// snapshotSupply is health.SupplySource over the pricer's snapshot: the energy sellable now
// for 1 h is the 1 h energy book's depth. Without a fresh snapshot nothing can be sold, and
// the status says the source is unreachable.
type snapshotSupply struct{ src pricing.SnapshotSource }

func (s snapshotSupply) AvailableEnergy(context.Context) (int64, error) {
	snap, ok := s.src.Current()
	if !ok {
		return 0, errors.New("no fresh price snapshot (is the pricer running?)")
	}
	return snap.Table.AvailableEnergy, nil
}
