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
	"rental/infra/custody"
	"rental/infra/orderstore"
	"rental/infra/stages"
	"rental/infra/stages/ledgerstage"
	"rental/infra/supply"
	"rental/infra/tron"
	"rental/processors/orderflow"
)

// OrderFlow is the order processor's logic: the pools of POOL_ADDRESSES signed for by
// SIGNER_KEYS (their delegate permissions checked on chain now and every minute after), the
// node of TRON_NODE_URL and the ledger. The binary runs it (Processor) and uses it for
// support refunds.
func OrderFlow(ctx context.Context, cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (*orderflow.Flow, error) {
	node := tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(5*time.Second))
	var signers *custody.Signers
	if cfg.Network.SellsOwnStake() {
		if len(cfg.PoolAddresses) == 0 || len(cfg.SignerKeys) == 0 {
			return nil, errors.New("POOL_ADDRESSES and SIGNER_KEYS must be set: the order processor signs the pools' delegations with keys holding their delegate permission (docs/custody.md)")
		}
		var err error
		if signers, err = stages.Signers(ctx, cfg, node, "orderflow", cfg.PoolAddresses, cfg.SignerKeys, log, reg, func(ctx context.Context, problems map[tron.Address]string) {
			for p, why := range problems {
				if err := orderstore.SetPoolCustody(ctx, pool, p.String(), cfg.Network, why); err != nil {
					log.Warn("could not record a pool's custody state", "pool", p.String(), "err", err)
				}
			}
		}); err != nil {
			return nil, err
		}
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
	// The deep reserve the pricer books (Supply) is the one the processor rents from; the
	// first signer key's own account pays for the rentals.
	var deep orderflow.DeepReserve
	if signers != nil && !cfg.Pricing.DeepContract.IsZero() {
		deep = supply.NewDeepReserve(node, cfg.Pricing.DeepContract, signers.Payer().Address())
	}
	return orderflow.New(orderflow.Options{
		Providers:     providers,
		Deep:          deep,
		Pool:          pool,
		Node:          node,
		Ledger:        led,
		Network:       cfg.Network,
		Signers:       signers,
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
	f, err := OrderFlow(context.Background(), cfg, pool, log, reg)
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
