package acceptstage

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/pricecache"
	"rental/infra/quotes"
	"rental/infra/tron"
)

// PricingModule is the edge's pricing endpoints and the snapshot source feeding them. The
// source must run for as long as the edge serves.
func PricingModule(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, idem *idempotency.Store, log *slog.Logger) (*edge.Pricing, *pricecache.Source, error) {
	src := pricecache.NewSource(rdb, pricecache.SourceOptions{Network: cfg.Network, Logger: log})
	mod, err := edge.NewPricing(edge.PricingOptions{
		Network:     cfg.Network,
		Snapshots:   src,
		Chain:       tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(2*time.Second)),
		Quotes:      quotes.New(pool),
		Idempotency: idem,
		Logger:      log,
	})
	if err != nil {
		return nil, nil, err
	}
	return mod, src, nil
}
