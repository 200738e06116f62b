package substage

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/stages"
	"rental/infra/stages/acceptstage"
	"rental/infra/stages/ledgerstage"
	"rental/infra/tron"
	"rental/processors/subscriptions"
	"rental/schemas/pricing"
)

// SubscriptionWatcher is the subscription watcher stage (processors/subscriptions): it
// reads receivers from TRON_NODE_URL and places refills through the edge's order module
// (every check of POST /v1/orders, priced from the pricer's snapshot in Redis, which the
// returned runner keeps fed), and charges plan fees through the ledger.
func SubscriptionWatcher(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	idem := idempotency.New(pool, idempotency.Options{})
	pricingAPI, snapshots, err := acceptstage.PricingModule(cfg, pool, rdb, idem, log)
	if err != nil {
		return nil, err
	}
	led, err := ledgerstage.Ledger(cfg, pool)
	if err != nil {
		return nil, err
	}
	ordersAPI, err := acceptstage.OrdersModule(cfg, pool, pricingAPI, led, idem, log, nil)
	if err != nil {
		return nil, err
	}
	w, err := subscriptions.New(subscriptions.Options{
		Pool:        pool,
		Chain:       tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(3*time.Second)),
		Placer:      RefillPlacer{Orders: ordersAPI},
		Ledger:      led,
		CheckEvery:  cfg.Subscriptions.CheckEvery,
		Grace:       cfg.Subscriptions.Grace,
		RenewalLead: cfg.Subscriptions.RenewalLead,
		Logger:      log,
		Registerer:  reg,
	})
	if err != nil {
		return nil, err
	}
	return stages.Together(w, snapshots), nil
}

// RefillPlacer places the watcher's refills through the edge's order module, so a refill
// is priced, checked and charged exactly like POST /v1/orders and then flows through the
// order processor like any other order.
type RefillPlacer struct{ Orders *edge.Orders }

// PlaceRefill implements subscriptions.Placer.
func (p RefillPlacer) PlaceRefill(ctx context.Context, tx pgx.Tx, accountID string, r subscriptions.Refill) (subscriptions.Placed, error) {
	sub := r.SubscriptionID
	rec, err := p.Orders.PlaceTx(ctx, tx, accountID, edge.Placement{
		ClientOrderID: r.ClientOrderID, Resource: pricing.Resource(r.Resource), Amount: r.Amount, Tier: pricing.Tier(r.Tier),
		Receiver: r.Receiver, MaxPriceSun: r.MaxPriceSun, SubscriptionID: &sub,
	})
	if errors.Is(err, edge.ErrPlacedBefore) {
		return subscriptions.Placed{}, subscriptions.ErrPlacedBefore
	}
	if err != nil {
		return subscriptions.Placed{}, err
	}
	return subscriptions.Placed{OrderID: rec.ID, TotalSun: rec.TotalAmountSun}, nil
}
