// Command marketwatch runs the market sampler (processors/marketwatch, docs/market.md):
// every MARKET_SAMPLE_INTERVAL (5 minutes) it reads each provider of MARKET_FEEDS and this
// service's own prices (the pricer's snapshot in Redis), stores the samples behind
// GET /v1/market and /v1/market/history, publishes each to market.samples.v1 through the
// outbox, and prunes samples older than MARKET_RETENTION. Replicas are safe: a provider's
// sample is stored once per 5-minute slot.
//
// Configuration: the common variables (README.md), REDIS_URL, MARKET_FEEDS,
// MARKET_SELF_SLUG, MARKET_SAMPLE_INTERVAL, MARKET_RETENTION.
package main

import (
	"rental/infra/stages"
	"rental/infra/stages/marketstage"
)

func main() {
	stages.Main("marketwatch", func(p *stages.Process) (stages.Runner, error) {
		rdb, err := p.Redis() // waits for Redis when it is down at start
		if err != nil {
			return nil, err
		}
		return marketstage.MarketWatch(p.Cfg, p.Pool, rdb, p.Log, p.Reg)
	})
}
