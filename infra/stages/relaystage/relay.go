// Package relaystage wires the outbox relay (infra/outbox) from configuration.
package relaystage

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/config"
	"rental/infra/outbox"
	"rental/infra/stages"
)

// Relay is the outbox relay publishing through producer.
func Relay(cfg config.Config, pool *pgxpool.Pool, producer *kgo.Client, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	return outbox.NewRelay(outbox.RelayOptions{
		Pool:       pool,
		Producer:   producer,
		Logger:     log,
		Registerer: reg,
		SweepEvery: cfg.OutboxSweepEvery,
		PollEvery:  cfg.OutboxPollEvery,
	})
}
