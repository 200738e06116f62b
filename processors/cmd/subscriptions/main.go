// Command subscriptions runs the subscription watcher (processors/subscriptions,
// docs/subscriptions.md): every SUBSCRIPTION_CHECK_INTERVAL it reads each live
// subscription's address from the node, places refills and plan top-ups as orders (which
// the order processor then delivers), bills plans daily, and suspends, pauses and resumes
// subscriptions with their subscription.* events. Run several replicas: each check holds
// its subscription's row lock (FOR UPDATE SKIP LOCKED), and refill order ids are derived
// from a sequence advanced in the same transaction.
//
// Configuration: the common variables (README.md), REDIS_URL for the pricer's snapshot,
// and SUBSCRIPTION_CHECK_INTERVAL, SUBSCRIPTION_BILLING_GRACE, SUBSCRIPTION_RENEWAL_LEAD.
package main

import (
	"rental/infra/stages"
	"rental/infra/stages/substage"
)

func main() {
	stages.Main("subscriptions", func(p *stages.Process) (stages.Runner, error) {
		rdb, err := p.Redis() // waits for Redis when it is down at start
		if err != nil {
			return nil, err
		}
		return substage.SubscriptionWatcher(p.Cfg, p.Pool, rdb, p.Log, p.Reg)
	})
}
