// Package webhookstage wires webhook delivery (consumers/webhookdelivery) from
// configuration, and the webhook store and URL policy the edge's /v1/webhooks endpoints
// share with it (edgestage).
package webhookstage

import (
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/consumers/webhookdelivery"
	"rental/infra/config"
	"rental/infra/stages"
	"rental/infra/webhooks"
)

// WebhookPolicy is the URL and dial policy of webhook targets from configuration.
func WebhookPolicy(cfg config.Config) webhooks.Policy {
	return webhooks.Policy{AllowLoopback: cfg.Webhook.AllowLoopback, Ports: cfg.Webhook.Ports}
}

// WebhookStore is the webhook endpoint store; the master key encrypts secrets at rest.
func WebhookStore(cfg config.Config, pool *pgxpool.Pool) (*webhooks.Store, error) {
	if len(cfg.Auth.MasterKey) == 0 {
		return nil, errors.New("API_KEY_MASTER_KEY is not set: it also encrypts webhook secrets at rest")
	}
	return webhooks.NewStore(pool, cfg.Auth.MasterKey, cfg.Auth.PreviousMasterKey)
}

// WebhookDeliverer is the webhook delivery consumer (consumers/webhookdelivery).
func WebhookDeliverer(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	store, err := WebhookStore(cfg, pool)
	if err != nil {
		return nil, err
	}
	sec, err := stages.KafkaOpts(cfg)
	if err != nil {
		return nil, err
	}
	return webhookdelivery.New(webhookdelivery.Options{
		ClientOpts: sec,
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
