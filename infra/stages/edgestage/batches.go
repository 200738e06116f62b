package edgestage

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/edge"
	"rental/infra/acceptance"
	"rental/infra/config"
	"rental/infra/idempotency"
)

// batchesModule is the edge's batch endpoints over order acceptance.
func batchesModule(cfg config.Config, pool *pgxpool.Pool, acc *acceptance.Orders, idem *idempotency.Store, log *slog.Logger) (*edge.Batches, error) {
	return edge.NewBatches(edge.BatchesOptions{
		Acceptance:     acc,
		Pool:           pool,
		Idempotency:    idem,
		MaxReceivers:   cfg.Batches.MaxReceivers,
		MaxTotalEnergy: cfg.Batches.MaxTotalEnergy,
		MaxOpen:        cfg.Batches.MaxOpen,
		Logger:         log,
	})
}
