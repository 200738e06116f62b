package config

import "time"

// Payments configures pay by transfer (processors/payments, docs/pricing.md "Pay by
// transfer").
type Payments struct {
	Enabled       bool          // PAY_BY_TRANSFER: run the stage and publish payment_addresses (needs DEPOSIT_HD_KEY's private form)
	Confirmations int           // PAY_CONFIRMATIONS: blocks holding a transfer before it is acted on (1: the block itself)
	MaxSun        int64         // PAY_MAX_SUN: larger transfers are refunded whole
	DustSun       int64         // PAY_DUST_SUN: refunds below it are kept
	PollEvery     time.Duration // PAY_POLL_INTERVAL: the follower's and the worker's poll
}

func loadPayments(env *Env) Payments {
	p := Payments{
		Enabled:       env.Bool("PAY_BY_TRANSFER", true),
		Confirmations: env.PositiveInt("PAY_CONFIRMATIONS", 1),
		MaxSun:        int64(env.PositiveInt("PAY_MAX_SUN", 5_000_000_000)),
		DustSun:       int64(env.Int("PAY_DUST_SUN", 1_000_000)),
		PollEvery:     env.Duration("PAY_POLL_INTERVAL", 200*time.Millisecond),
	}
	return p
}
