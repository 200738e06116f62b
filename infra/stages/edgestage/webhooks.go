package edgestage

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/edge"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/stages/webhookstage"
)

// webhooksModule serves the /v1/webhooks endpoints on the edge.
func webhooksModule(cfg config.Config, pool *pgxpool.Pool, idem *idempotency.Store) (edge.Module, error) {
	store, err := webhookstage.WebhookStore(cfg, pool)
	if err != nil {
		return nil, err
	}
	return edge.NewWebhooks(edge.WebhooksOptions{
		Store: store, Idempotency: idem, Policy: webhookstage.WebhookPolicy(cfg), Brand: cfg.Brand, Network: cfg.Network,
	})
}
