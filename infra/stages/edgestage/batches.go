package edgestage

import (
	"log/slog"

	"rental/edge"
	"rental/infra/config"
)

// batchesModule is the edge's batch endpoints over the order module.
func batchesModule(cfg config.Config, ordersAPI *edge.Orders, log *slog.Logger) (*edge.Batches, error) {
	return edge.NewBatches(edge.BatchesOptions{
		Orders:         ordersAPI,
		MaxReceivers:   cfg.Batches.MaxReceivers,
		MaxTotalEnergy: cfg.Batches.MaxTotalEnergy,
		MaxOpen:        cfg.Batches.MaxOpen,
		Logger:         log,
	})
}
