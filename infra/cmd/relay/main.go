// Command relay publishes committed outbox rows to Kafka (KAFKA_BROKERS) from Postgres
// (DATABASE_URL). Run two or more: rows are sharded by key and each shard is held by one
// relay at a time, so per-key order survives a failover. SIGTERM stops it cleanly.
package main

import (
	"rental/infra/stages"
	"rental/infra/stages/relaystage"
)

func main() {
	stages.Main("relay", func(p *stages.Process) (stages.Runner, error) {
		producer, err := stages.KafkaProducer(p.Ctx, p.Cfg)
		if err != nil {
			return nil, err
		}
		p.Defer(producer.Close)
		return relaystage.Relay(p.Cfg, p.Pool, producer, p.Log, p.Reg)
	})
}
