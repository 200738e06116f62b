// Package chainstage wires the chain follower (chainwatch) from configuration.
package chainstage

import (
	"log/slog"
	"slices"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/chainwatch"
	"rental/infra/config"
	"rental/infra/outbox"
	"rental/infra/stages"
	"rental/infra/tron"
)

// Chainwatch is the chain follower reading cfg.TronNodeURL and following cfg.USDTContract.
func Chainwatch(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	return chainwatch.New(chainwatch.Options{
		Pool:          pool,
		Source:        chainwatch.NewNodeSource(tron.NewClient(cfg.TronNodeURL), 4),
		Outbox:        outbox.InsertRecord,
		Network:       cfg.Network,
		Tokens:        []tron.Address{cfg.USDTContract},
		Confirmations: cfg.Confirmations,
		Solidified:    true,
		PollEvery:     cfg.ChainPollEvery,
		Start:         cfg.ChainStartBlock,
		Pools:         watchedPools(cfg),
		Logger:        log,
		Registerer:    reg,
	})
}

// watchedPools are the own pools whose foreign use is reported: POOL_ADDRESSES and the
// sweeper's SWEEP_POOL_ADDRESS.
func watchedPools(cfg config.Config) []tron.Address {
	out := append([]tron.Address(nil), cfg.PoolAddresses...)
	if a, err := tron.ParseAddress(cfg.Ledger.SweepPoolAddress); err == nil && !slices.Contains(out, a) {
		out = append(out, a)
	}
	return out
}
