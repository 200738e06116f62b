package stages

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"rental/edge"
	"rental/infra/acceptance"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/tron"
	"rental/processors/subscriptions"
)

// subscriptionsModule is the edge's subscription endpoints: the plans priced from the
// live prices, fees charged through the ledger, SUBSCRIPTIONS_AVAILABLE.
func subscriptionsModule(cfg config.Config, pool *pgxpool.Pool, prices *acceptance.Prices, idem *idempotency.Store, log *slog.Logger) (*edge.Subscriptions, error) {
	led, err := Ledger(cfg, pool)
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

// SubscriptionWatcher is the subscription watcher stage (processors/subscriptions): it
// reads receivers from TRON_NODE_URL and places refills through order acceptance (every
// check of POST /v1/orders, priced from the pricer's snapshot in Redis, which the returned
// runner keeps fed), and charges plan fees through the ledger.
func SubscriptionWatcher(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger, reg prometheus.Registerer) (Runner, error) {
	idem := idempotency.New(pool, idempotency.Options{})
	prices, snapshots, err := livePrices(cfg, rdb, log)
	if err != nil {
		return nil, err
	}
	led, err := Ledger(cfg, pool)
	if err != nil {
		return nil, err
	}
	acc, err := Acceptance(cfg, pool, prices, led, idem, log, nil)
	if err != nil {
		return nil, err
	}
	w, err := subscriptions.New(subscriptions.Options{
		Pool:        pool,
		Chain:       tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(3*time.Second)),
		Placer:      acc,
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
	return Together(w, snapshots), nil
}
