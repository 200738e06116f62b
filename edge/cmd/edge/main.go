// Command edge serves the public API (rental-api-v1) on HTTP_ADDR and Prometheus metrics on
// METRICS_ADDR. It is stateless; run as many replicas as traffic needs behind a load
// balancer. SIGINT or SIGTERM stops accepting, drains in-flight requests for SHUTDOWN_GRACE
// and exits. API_KEY_MASTER_KEY and DEPOSIT_HD_KEY are required (see README).
package main

import (
	"rental/infra/stages"
	"rental/infra/stages/edgestage"
)

func main() {
	stages.Main("edge", func(p *stages.Process) (stages.Runner, error) {
		// Only the edge binds PUBLIC_HOST into what customers sign.
		if err := p.Cfg.CheckDeployed(); err != nil {
			return nil, err
		}
		rdb, err := p.Redis() // waits for Redis when it is down at start
		if err != nil {
			return nil, err
		}
		return edgestage.Edge(p.Cfg, p.Pool, rdb, p.Log, p.Reg)
	})
}
