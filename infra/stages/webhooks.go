package stages

import (
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/consumers/webhookdelivery"
	"rental/edge"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/webhooks"
)

// WebhookPolicy is the URL and dial policy of webhook targets from configuration.
func WebhookPolicy(cfg config.Config) webhooks.Policy {
	return webhooks.Policy{AllowLoopback: cfg.Webhook.AllowLoopback}
}

func webhookStore(cfg config.Config, pool *pgxpool.Pool) (*webhooks.Store, error) {
	if len(cfg.Auth.MasterKey) == 0 {
		return nil, errors.New("API_KEY_MASTER_KEY is not set: it also encrypts webhook secrets at rest")
	}
	return webhooks.NewStore(pool, cfg.Auth.MasterKey)
}

// webhooksModule serves the /v1/webhooks endpoints on the edge.
func webhooksModule(cfg config.Config, pool *pgxpool.Pool, idem *idempotency.Store) (edge.Module, error) {
	store, err := webhookStore(cfg, pool)
	if err != nil {
		return nil, err
	}
	return edge.NewWebhooks(edge.WebhooksOptions{
		Store: store, Idempotency: idem, Policy: WebhookPolicy(cfg), Brand: cfg.Brand, Network: cfg.Network,
	})
}

// WebhookDeliverer is the webhook delivery consumer (consumers/webhookdelivery).
func WebhookDeliverer(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (Runner, error) {
	store, err := webhookStore(cfg, pool)
	if err != nil {
		return nil, err
	}
	return webhookdelivery.New(webhookdelivery.Options{
		Brokers:    cfg.KafkaBrokers,
		Store:      store,
		Policy:     WebhookPolicy(cfg),
		Brand:      cfg.Brand,
		Delays:     cfg.Webhook.RetryDelays,
		Logger:     log,
		Registerer: reg,

		MaxDrives:           cfg.Webhook.MaxDrives,
		MaxDrivesPerAccount: cfg.Webhook.MaxDrivesPerAccount,
	})
}
