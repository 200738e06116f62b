package edgestage

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"rental/edge"
	"rental/infra/chainread"
	"rental/infra/config"
	"rental/infra/marketstore"
	"rental/infra/tron"
	"rental/schemas/pricing"
)

// chainModules are the edge's market board, address resources and transfer estimate
// endpoints. The resources cache is shared by the replicas through rdb under prefix.
func chainModules(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, prefix string, snaps pricing.SnapshotSource) ([]edge.Module, error) {
	reader, err := chainread.New(chainread.Options{
		Node:    tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(3*time.Second)),
		Network: cfg.Network, USDT: cfg.USDTContract,
		Redis: rdb, RedisPrefix: prefix, TTL: cfg.Market.ResourcesTTL,
	})
	if err != nil {
		return nil, err
	}
	mk, err := edge.NewMarket(edge.MarketOptions{Store: marketstore.New(pool, cfg.Network), Fees: reader})
	if err != nil {
		return nil, err
	}
	res, err := edge.NewResources(edge.ResourcesOptions{Chain: reader, Orders: edge.OrdersOnReceiver{Q: pool}})
	if err != nil {
		return nil, err
	}
	est, err := edge.NewTransferEstimates(edge.EstimateOptions{Network: cfg.Network, Snapshots: snaps, Chain: reader,
		USDT: cfg.USDTContract, Supported: cfg.Market.SupportedTRC20})
	if err != nil {
		return nil, err
	}
	return []edge.Module{mk, res, est, paymentsModule(cfg, pool)}, nil
}
