// Command chainwatch follows the TRON chain (TRON_NODE_URL) CONFIRMATIONS blocks below the
// head and writes normalized chain facts to the outbox in Postgres (DATABASE_URL); the relay
// stage publishes them. One instance per network does the work; a second one is safe (its
// commits fail the cursor check) but only repeats node calls.
package main

import (
	"rental/infra/stages"
	"rental/infra/stages/chainstage"
)

func main() {
	stages.Main("chainwatch", func(p *stages.Process) (stages.Runner, error) {
		return chainstage.Chainwatch(p.Cfg, p.Pool, p.Log, p.Reg)
	})
}
