// Command payments runs pay by transfer (processors/payments, docs/pricing.md "Pay by
// transfer"): it follows the chain PAY_CONFIRMATIONS deep for TRX transfers to the price
// table's payment addresses, places each as an order of the transfer account (delivered
// by the order processor) or refunds it to its sender, and publishes the addresses in the
// table. One replica per network: the follower's commits check its cursor, so a second one
// is safe but only repeats node reads.
//
// Configuration: the common variables (README.md), REDIS_URL for the pricer's snapshot,
// DEPOSIT_HD_KEY (private form), PAY_BY_TRANSFER, PAY_CONFIRMATIONS, PAY_MAX_SUN,
// PAY_DUST_SUN, PAY_POLL_INTERVAL.
package main

import (
	"errors"

	"rental/infra/stages"
	"rental/infra/stages/paystage"
)

func main() {
	stages.Main("payments", func(p *stages.Process) (stages.Runner, error) {
		rdb, err := p.Redis()
		if err != nil {
			return nil, err
		}
		r, err := paystage.Payments(p.Cfg, p.Pool, rdb, p.Log, p.Reg)
		if err == nil && r == nil {
			err = errors.New("PAY_BY_TRANSFER is false: nothing to run")
		}
		return r, err
	})
}
