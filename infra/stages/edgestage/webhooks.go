package edgestage

import (
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/ratelimit"
	"rental/infra/stages/webhookstage"
)

// webhooksModule serves the /v1/webhooks endpoints on the edge.
func webhooksModule(cfg config.Config, pool *pgxpool.Pool, idem *idempotency.Store, limiter *ratelimit.Limiter) (edge.Module, error) {
	store, err := webhookstage.WebhookStore(cfg, pool)
	if err != nil {
		return nil, err
	}
	return edge.NewWebhooks(edge.WebhooksOptions{
		Store: store, Idempotency: idem, Policy: webhookstage.WebhookPolicy(cfg), Brand: cfg.Brand, Network: cfg.Network,
		Limiter: limiter, TestBudget: redis_rate.Limit{Rate: cfg.Webhook.TestsPerHour, Burst: max(cfg.Webhook.TestsPerHour/3, 1), Period: time.Hour},
	})
}
