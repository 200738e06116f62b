package edgestage

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/stages/ledgerstage"
)

// subscriptionsModule is the edge's subscription endpoints: the plans priced from the
// pricing module's snapshot, fees charged through the ledger, SUBSCRIPTIONS_AVAILABLE.
func subscriptionsModule(cfg config.Config, pool *pgxpool.Pool, pricingAPI *edge.Pricing, idem *idempotency.Store, log *slog.Logger) (*edge.Subscriptions, error) {
	led, err := ledgerstage.Ledger(cfg, pool)
	if err != nil {
		return nil, err
	}
	available := cfg.Subscriptions.Available
	return edge.NewSubscriptions(edge.SubscriptionsOptions{
		Network:     cfg.Network,
		Ledger:      led,
		Idempotency: idem,
		Pricing:     pricingAPI,
		Available:   func() bool { return available },
		Logger:      log,
	})
}
