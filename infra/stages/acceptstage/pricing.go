package acceptstage

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"rental/infra/acceptance"
	"rental/infra/config"
	"rental/infra/pricecache"
	"rental/infra/tron"
)

// LivePrices is the live pricer shared by the edge's pricing endpoints and order
// acceptance, and the snapshot source feeding it. The source must run for as long as the
// prices are used.
func LivePrices(cfg config.Config, rdb *redis.Client, log *slog.Logger) (*acceptance.Prices, *pricecache.Source, error) {
	src := pricecache.NewSource(rdb, pricecache.SourceOptions{Network: cfg.Network, Logger: log})
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
