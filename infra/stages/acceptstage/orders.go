package acceptstage

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/stages/ledgerstage"
	"rental/infra/tron"
)

// OrdersModule is the edge's order endpoints. led is the edge's ledger (its balance.low
// rule applies to the holds order creation places); nil builds one the same way (ledgerstage.Ledger).
func OrdersModule(cfg config.Config, pool *pgxpool.Pool, pricingAPI *edge.Pricing, led *ledgerstore.Ledger,
	idem *idempotency.Store, log *slog.Logger, reg prometheus.Registerer) (*edge.Orders, error) {
	if led == nil {
		var err error
		if led, err = ledgerstage.Ledger(cfg, pool); err != nil {
			return nil, err
		}
	}
	own := append([]tron.Address(nil), cfg.PoolAddresses...)
	if cfg.Ledger.Treasury != "" {
		t, err := tron.ParseAddress(cfg.Ledger.Treasury) // validated by config.Load
		if err != nil {
			return nil, err
		}
		own = append(own, t)
	}
	return edge.NewOrders(edge.OrdersOptions{
		Network:             cfg.Network,
		Pricing:             pricingAPI,
		Ledger:              led,
		Idempotency:         idem,
		OwnAddresses:        own,
		MaxInFlight:         cfg.Orders.MaxInFlight,
		MaxOrderEnergy:      cfg.Orders.MaxOrderEnergy,
		ReceiverMaxEnergy:   cfg.Orders.ReceiverMaxEnergy,
		ForbidProviderSpill: !cfg.Orders.AllowProviderSpill,
		MarketProviders:     len(cfg.Pricing.Providers),
		GroupCommitters:     groupCommitters(cfg.Orders.GroupCommitters),
		Registerer:          reg,
		Logger:              log,
	})
}

// groupCommitters maps ORDER_GROUP_COMMITTERS (0: no group commit) to the option (-1).
func groupCommitters(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
