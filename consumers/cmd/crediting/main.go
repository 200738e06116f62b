// Command crediting credits deposits: it consumes chain facts (chain.facts.v1 on
// KAFKA_BROKERS) in consumer group "crediting" and credits TRX and USDT transfers to deposit
// addresses in the ledger (DATABASE_URL) once DEPOSIT_CONFIRMATIONS deep, emitting
// balance.credited through the outbox. Replicas scale up to the topic's partition count;
// every credit is exactly once per (tx hash, log index) whatever runs or crashes.
// With TREASURY_ADDRESS set it also runs the sweeping job (one replica is enough: open sweeps
// are unique per address, so a second sweeper only repeats node reads).
package main

import (
	"rental/infra/stages"
	"rental/infra/stages/creditstage"
)

func main() {
	stages.Main("crediting", func(p *stages.Process) (stages.Runner, error) {
		consumer, err := creditstage.Crediting(p.Cfg, p.Pool, p.Log, p.Reg)
		if err != nil {
			return nil, err
		}
		sweeper, err := creditstage.Sweeper(p.Cfg, p.Pool, p.Log, p.Reg)
		if err != nil {
			return nil, err
		}
		return stages.Together(consumer, sweeper), nil
	})
}
