// Package orderflowstage wires the order processor (processors/orderflow) from
// configuration.
package orderflowstage

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/config"
	"rental/infra/stages"
	"rental/infra/stages/ledgerstage"
	"rental/infra/supply"
	"rental/infra/tron"
	"rental/processors/orderflow"
)

// OrderFlow is the order processor's logic: the pools' keys from POOL_KEYS, the node of
// TRON_NODE_URL and the ledger. The binary runs it (Processor) and uses it for support
// refunds.
func OrderFlow(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (*orderflow.Flow, error) {
	if len(cfg.PoolKeys) == 0 && cfg.Network.SellsOwnStake() {
		return nil, errors.New("POOL_KEYS is not set: the order processor signs delegations with the stake pools' keys")
	}
	led, err := ledgerstage.Ledger(cfg, pool)
	if err != nil {
		return nil, err
	}
	// Providers deliver what the own pools cannot (on nile: everything), in slug order.
	var providers []orderflow.Provider
	for _, slug := range slices.Sorted(maps.Keys(cfg.Pricing.Providers)) {
		providers = append(providers, supply.NewHTTPProvider(slug, cfg.Pricing.Providers[slug], &http.Client{Timeout: 10 * time.Second}))
	}
	node := tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(5*time.Second))
	// The deep reserve the pricer books (Supply) is the one the processor rents from; the
	// first pool pays for the rentals.
	var deep orderflow.DeepReserve
	if cfg.Network.SellsOwnStake() && !cfg.Pricing.DeepContract.IsZero() && len(cfg.PoolKeys) > 0 {
		deep = supply.NewDeepReserve(node, cfg.Pricing.DeepContract, cfg.PoolKeys[0].Address())
	}
	return orderflow.New(orderflow.Options{
		Providers:     providers,
		Deep:          deep,
		Pool:          pool,
		Node:          node,
		Ledger:        led,
		Network:       cfg.Network,
		Pools:         cfg.PoolKeys,
		LandGrace:     cfg.Processor.LandGrace,
		LockPolicy:    orderflow.LockPolicy(cfg.Processor.DelegationLock),
		Confirmations: cfg.Confirmations,
		Logger:        log,
		Registerer:    reg,
	})
}

// Processor is the order processor stage: intents, chain facts and due orders, as one
// member of the processors' consumer groups.
func Processor(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	f, err := OrderFlow(cfg, pool, log, reg)
	if err != nil {
		return nil, err
	}
	sec, err := stages.KafkaOpts(cfg)
	if err != nil {
		return nil, err
	}
	return stages.RunnerFunc(func(ctx context.Context) error {
		return f.Run(ctx, orderflow.RunOptions{Brokers: cfg.KafkaBrokers,
			ClientOpts: append(sec, kgo.SessionTimeout(cfg.Processor.SessionTimeout), kgo.HeartbeatInterval(cfg.Processor.SessionTimeout/5),
				// A replica that died mid-rebalance holds the group up for at most this long.
				kgo.RebalanceTimeout(cfg.Processor.SessionTimeout))})
	}), nil
}
