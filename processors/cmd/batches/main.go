// Command batches runs the batch processor (docs/batches.md): it places one order per
// pending batch receiver, with every check and charge of POST /v1/orders, and records each
// receiver's outcome from the order events; the last outcome of a batch writes
// batch.completed. Run several replicas: they claim receivers with SKIP LOCKED and share the
// batchflow.orders consumer group.
//
// Configuration: the common variables (docs in README.md), REDIS_URL for the pricer's
// snapshots, and the order limits (MAX_IN_FLIGHT_ORDERS, MAX_ORDER_ENERGY, ...) the edge
// uses, plus BATCH_WORKERS and BATCH_PLACE_INTERVAL.
package main

import (
	"rental/infra/stages"
	"rental/infra/stages/batchstage"
)

func main() {
	stages.Main("batches", func(p *stages.Process) (stages.Runner, error) {
		rdb, err := p.Redis() // waits for Redis when it is down at start
		if err != nil {
			return nil, err
		}
		return batchstage.Batches(p.Cfg, p.Pool, rdb, p.Log, p.Reg)
	})
}
