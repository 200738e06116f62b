// Command webhooks delivers customer events to the accounts' webhook endpoints
// (consumers/webhookdelivery): it reads the event topics and the retry topics from KAFKA_BROKERS
// and keeps delivery state in DATABASE_URL. Run several: each topic partition is handled
// by one replica at a time. SIGTERM stops it cleanly; after a SIGKILL the next replica
// redoes what was not committed (deliveries are at least once).
package main

import (
	"rental/infra/stages"
	"rental/infra/stages/webhookstage"
)

func main() {
	stages.Main("webhooks", func(p *stages.Process) (stages.Runner, error) {
		// Creates the retry and dead-letter topics when missing.
		producer, err := stages.KafkaProducer(p.Ctx, p.Cfg)
		if err != nil {
			return nil, err
		}
		producer.Close()
		return webhookstage.WebhookDeliverer(p.Cfg, p.Pool, p.Log, p.Reg)
	})
}
