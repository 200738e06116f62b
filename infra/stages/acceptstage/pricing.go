package acceptstage

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"rental/infra/acceptance"
	"rental/infra/config"
	"rental/infra/pricecache"
	"rental/infra/pricestore"
	"rental/infra/tron"
)

// LivePrices is the live pricer shared by the edge's pricing endpoints and order
// acceptance, and the snapshot source feeding it. The source must run for as long as the
// prices are used.
func LivePrices(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger) (*acceptance.Prices, *pricecache.Source, error) {
	src := SnapshotSource(cfg, pool, rdb, log)
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

// SnapshotSource is the pricer's snapshot held in memory: from Redis, and from Postgres
// (pricestore, the pricer's durable copy) when Redis has no fresh one. Run it.
func SnapshotSource(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger) *pricecache.Source {
	return pricecache.NewSource(rdb, pricecache.SourceOptions{Network: cfg.Network, Durable: pricestore.New(pool), Logger: log})
}
