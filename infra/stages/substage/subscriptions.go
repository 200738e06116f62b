package substage

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/stages"
	"rental/infra/stages/acceptstage"
	"rental/infra/stages/ledgerstage"
	"rental/infra/tron"
	"rental/processors/subscriptions"
)

// SubscriptionWatcher is the subscription watcher stage (processors/subscriptions): it
// reads receivers from TRON_NODE_URL and places refills through order acceptance (every
// check of POST /v1/orders, priced from the pricer's snapshot in Redis, which the returned
// runner keeps fed), and charges plan fees through the ledger.
func SubscriptionWatcher(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	idem := idempotency.New(pool, idempotency.Options{})
	prices, snapshots, err := acceptstage.LivePrices(cfg, pool, rdb, log)
	if err != nil {
		return nil, err
	}
	led, err := ledgerstage.Ledger(cfg, pool)
	if err != nil {
		return nil, err
	}
	acc, err := acceptstage.Acceptance(cfg, pool, prices, led, idem, log, nil)
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
	return stages.Together(w, snapshots), nil
}
