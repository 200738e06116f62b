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
	"rental/infra/redisx"
	"rental/infra/stages"
	"rental/infra/stages/batchstage"
)

func main() {
	stages.Main("batches", func(p *stages.Process) (stages.Runner, error) {
		rdb, err := redisx.Connect(p.Ctx, p.Cfg.RedisURL)
		if err != nil {
			return nil, err
		}
		p.Defer(func() { _ = rdb.Close() })
		return batchstage.Batches(p.Cfg, p.Pool, rdb, p.Log, p.Reg)
	})
}
