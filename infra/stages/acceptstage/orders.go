package acceptstage

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/acceptance"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/orderstore"
	"rental/infra/sigstore"
	"rental/infra/stages/ledgerstage"
	"rental/infra/tron"
)

// Acceptance is order acceptance from configuration: POST /v1/orders, batch receivers and
// subscription refills. led is the ledger (its balance.low rule applies to the holds
// acceptance places); nil builds one the same way (ledgerstage.Ledger).
func Acceptance(cfg config.Config, pool *pgxpool.Pool, prices *acceptance.Prices, led *ledgerstore.Ledger,
	idem *idempotency.Store, log *slog.Logger, reg prometheus.Registerer) (*acceptance.Orders, error) {
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
	backlog := Backlog(cfg, pool, log)
	if reg != nil {
		backlog.Register(reg)
	}
	return acceptance.NewOrders(acceptance.Options{
		Network:             cfg.Network,
		Prices:              prices,
		Ledger:              led,
		Idempotency:         idem,
		OwnAddresses:        own,
		MaxInFlight:         cfg.Orders.MaxInFlight,
		MaxOrderEnergy:      cfg.Orders.MaxOrderEnergy,
		ReceiverMaxEnergy:   cfg.Orders.ReceiverMaxEnergy,
		ShortRental:         cfg.Orders.ShortRental,
		ForbidProviderSpill: !cfg.Orders.AllowProviderSpill,
		MarketProviders:     len(cfg.Pricing.Providers),
		CommitSupply:        true, // the pricer stage refreshes the rows (pricerstage)
		GroupCommitters:     groupCommitters(cfg.Orders.GroupCommitters),
		Backlog:             backlog,
		Signatures:          sigstore.New(pool, 0), // signed creations' signatures (1009 after a Redis loss)
		Registerer:          reg,
		Logger:              log,
	})
}

// Backlog is delivery's backlog as acceptance reads it (ORDER_BACKLOG_MAX_AGE). Each
// stage's instance reads the database at most once a second, and only while asked.
func Backlog(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger) *orderstore.Backlog {
	return orderstore.NewBacklog(pool, orderstore.BacklogOptions{Network: cfg.Network, MaxAge: cfg.Orders.BacklogMaxAge, Logger: log})
}

// groupCommitters maps ORDER_GROUP_COMMITTERS (0: no group commit) to the option (-1).
func groupCommitters(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
