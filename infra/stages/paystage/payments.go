// Package paystage wires pay by transfer (processors/payments) from configuration: the
// payment addresses and their keys derived from DEPOSIT_HD_KEY, the transfer account, the
// table's payment_addresses, and order acceptance for the transfer account's orders.
package paystage

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"rental/infra/accounts"
	"rental/infra/config"
	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/paystore"
	"rental/infra/pricestore"
	"rental/infra/stages"
	"rental/infra/stages/acceptstage"
	"rental/infra/stages/ledgerstage"
	"rental/infra/sweep"
	"rental/infra/tron"
	"rental/processors/payments"
	"rental/schemas/network"
	paying "rental/schemas/payments"
	"rental/schemas/pricing"
)

// TransferOwner is the owner address of the transfer account: the zero address
// (T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb), whose key nobody holds, so nobody can sign in as
// the transfer account.
var TransferOwner = tron.Address{0x41}

// Addresses derives every payment address with its key: one per (resource, tier) slot, at
// m/44'/195'/0'/0/<payments.Index>. hdKey is DEPOSIT_HD_KEY's private form (xprv or seed).
func Addresses(hdKey string) (map[tron.Address]payments.Address, error) {
	keys, err := sweep.NewKeys(hdKey)
	if err != nil {
		return nil, fmt.Errorf("pay by transfer: DEPOSIT_HD_KEY: %w", err)
	}
	out := map[tron.Address]payments.Address{}
	for _, r := range []pricing.Resource{pricing.Energy, pricing.Bandwidth} {
		for _, t := range pricing.Tiers {
			i, err := paying.Index(r, t)
			if err != nil {
				return nil, err
			}
			k, err := keys.Key(i)
			if err != nil {
				return nil, err
			}
			out[k.Address()] = payments.Address{RowKey: paying.RowKey(r, t), Key: k}
		}
	}
	return out, nil
}

// TransferAccount returns the transfer account of net, creating it on first use with a
// balance.low threshold of 0 (its balance is the payments in flight, never a customer's).
func TransferAccount(ctx context.Context, pool *pgxpool.Pool, led *ledgerstore.Ledger, net network.Network) (string, error) {
	st, err := accounts.New(pool, accounts.Options{})
	if err != nil {
		return "", err
	}
	label := "pay by transfer"
	a, created, err := st.CreateOrGetByOwner(ctx, net, TransferOwner, nil, &label)
	if err != nil {
		return "", err
	}
	if created {
		zero := int64(0)
		if err := led.SetLowThreshold(ctx, a.ID, &zero, "system:paystage", "the transfer account never warns"); err != nil {
			return "", err
		}
	}
	return a.ID, nil
}

// Publish writes the payment address of every enabled row of the price model into the
// table's payment_addresses (the pricer publishes it with the next snapshot).
func Publish(ctx context.Context, pool *pgxpool.Pool, net network.Network, addrs map[tron.Address]payments.Address) error {
	ps := pricestore.New(pool)
	m, err := ps.Load(ctx, net)
	if err != nil {
		return err
	}
	byRow := map[string]string{}
	for a, x := range addrs {
		byRow[x.RowKey] = a.String()
	}
	want := map[string]string{}
	for _, r := range m.Rows {
		if r.Enabled && !pricing.Retired(r.Tier) {
			if a, ok := byRow[paying.RowKey(r.Resource, r.Tier)]; ok {
				want[paying.RowKey(r.Resource, r.Tier)] = a
			}
		}
	}
	if equal(m.PaymentAddresses, want) {
		return nil
	}
	_, err = ps.SetPaymentAddresses(ctx, net, want)
	return err
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Payments is the pay-by-transfer stage, or nil when PAY_BY_TRANSFER is off. It needs the
// private form of DEPOSIT_HD_KEY (refunds are signed by the payment addresses): with an
// xpub it refuses to start rather than take transfers it could not refund.
func Payments(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	if !cfg.Payments.Enabled {
		return nil, nil
	}
	if strings.HasPrefix(strings.TrimSpace(cfg.Deposit.HDKey), "xpub") || cfg.Deposit.HDKey == "" {
		return nil, fmt.Errorf("PAY_BY_TRANSFER needs the private DEPOSIT_HD_KEY (xprv or seed) to sign refunds; set PAY_BY_TRANSFER=false to run without it")
	}
	addrs, err := Addresses(cfg.Deposit.HDKey)
	if err != nil {
		return nil, err
	}
	led, err := ledgerstage.Ledger(cfg, pool)
	if err != nil {
		return nil, err
	}
	prices, snapshots, err := acceptstage.LivePrices(cfg, pool, rdb, log)
	if err != nil {
		return nil, err
	}
	// The transfer account's orders are one per transfer: the per-account in-flight limit
	// (1101) does not apply to it.
	acfg := cfg
	acfg.Orders.MaxInFlight = 1 << 30
	acc, err := acceptstage.Acceptance(acfg, pool, prices, led, idempotency.New(pool, idempotency.Options{}), log, nil)
	if err != nil {
		return nil, err
	}
	var tokens []tron.Address
	if !cfg.USDTContract.IsZero() {
		tokens = append(tokens, cfg.USDTContract)
	}
	run := stages.RunnerFunc(func(ctx context.Context) error {
		var account string
		// The account and the table's addresses, retried until the database answers.
		for {
			var err error
			if account, err = TransferAccount(ctx, pool, led, cfg.Network); err == nil {
				err = Publish(ctx, pool, cfg.Network, addrs)
			}
			if err == nil {
				break
			}
			log.Warn("pay by transfer: setup failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(2 * time.Second):
			}
		}
		p, err := payments.New(payments.Options{
			Store: paystore.New(pool, cfg.Network), Ledger: led, Placer: acc, Prices: prices,
			Node:      tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(3*time.Second)),
			Addresses: addrs, AccountID: account, Tokens: tokens,
			Rules:         paying.Rules{MaxSun: cfg.Payments.MaxSun, DustSun: cfg.Payments.DustSun},
			Confirmations: cfg.Payments.Confirmations, Start: -1, PollEvery: cfg.Payments.PollEvery,
			Logger: log, Registerer: reg,
		})
		if err != nil {
			return err
		}
		return p.Run(ctx)
	})
	return stages.Together(run, snapshots), nil
}
