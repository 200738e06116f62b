package edgestage

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/edge"
	"rental/infra/acceptance"
	"rental/infra/idempotency"
	"rental/infra/quotes"
)

// ordersModule is the edge's order endpoints over order acceptance.
func ordersModule(pool *pgxpool.Pool, acc *acceptance.Orders, idem *idempotency.Store) (*edge.Orders, error) {
	return edge.NewOrders(edge.OrdersOptions{Acceptance: acc, Pool: pool, Idempotency: idem})
}

// pricingModule is the edge's pricing endpoints (prices, estimates, quotes) over the live
// prices order acceptance uses too.
func pricingModule(pool *pgxpool.Pool, prices *acceptance.Prices, idem *idempotency.Store, log *slog.Logger) (*edge.Pricing, error) {
	return edge.NewPricing(edge.PricingOptions{
		Prices:      prices,
		Quotes:      quotes.New(pool),
		Idempotency: idem,
		Logger:      log,
	})
}
