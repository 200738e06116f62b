package webhookstage

import (
	"strings"
	"testing"

	"rental/infra/config"
)

// The deliverer and the edge module refuse to start without the master key that opens
// webhook secrets; with it they are built from configuration.
func TestWebhookStagesNeedTheMasterKey(t *testing.T) {
	cfg := config.Config{Brand: "tronrent", Network: "nile", KafkaBrokers: []string{"127.0.0.1:1"}}
	if _, err := WebhookDeliverer(cfg, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "API_KEY_MASTER_KEY") {
		t.Fatalf("without a master key: %v", err)
	}
	cfg.Auth.MasterKey = make([]byte, 32)
	if _, err := WebhookDeliverer(cfg, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	cfg.Webhook.AllowLoopback = true
	if !WebhookPolicy(cfg).AllowLoopback {
		t.Error("WEBHOOK_ALLOW_LOOPBACK not applied")
	}
}
