// Package chainstage wires the chain follower (chainwatch) from configuration.
package chainstage

import (
	"log/slog"

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
		Logger:        log,
		Registerer:    reg,
	})
}
