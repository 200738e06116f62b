package edgestage

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/edge"
	"rental/infra/acceptance"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/stages/ledgerstage"
)

// subscriptionsModule is the edge's subscription endpoints: the plans priced from the
// live prices, fees charged through the ledger, SUBSCRIPTIONS_AVAILABLE.
func subscriptionsModule(cfg config.Config, pool *pgxpool.Pool, prices *acceptance.Prices, idem *idempotency.Store, log *slog.Logger) (*edge.Subscriptions, error) {
	led, err := ledgerstage.Ledger(cfg, pool)
	if err != nil {
		return nil, err
	}
	available := cfg.Subscriptions.Available
	return edge.NewSubscriptions(edge.SubscriptionsOptions{
		Network:     cfg.Network,
		Ledger:      led,
		Idempotency: idem,
		Prices:      prices,
		Available:   func() bool { return available },
		Logger:      log,
	})
}
