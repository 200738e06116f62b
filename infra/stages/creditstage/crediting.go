// Package creditstage wires the crediting consumer (consumers/crediting) and the sweeper
// (infra/sweep), the two jobs of the crediting binary.
package creditstage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/consumers/crediting"
	"rental/infra/config"
	"rental/infra/kafka"
	"rental/infra/metrics"
	"rental/infra/stages"
	"rental/infra/stages/ledgerstage"
	"rental/infra/sweep"
	"rental/infra/tron"
)

// Crediting is the crediting consumer (consumer group "crediting" on chain.facts.v1). It
// waits for DEPOSIT_CONFIRMATIONS itself when chainwatch runs shallower (CONFIRMATIONS).
func Crediting(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	l, err := ledgerstage.Ledger(cfg, pool)
	if err != nil {
		return nil, err
	}
	own := append([]tron.Address(nil), cfg.PoolAddresses...)
	if t, err := tron.ParseAddress(cfg.Ledger.Treasury); err == nil {
		own = append(own, t)
	}
	rates, err := ledgerstage.CachedUSDTRate(cfg, ledgerstage.CreditRateTTL, reg, log)
	if err != nil {
		return nil, err
	}
	c, err := crediting.New(crediting.Options{
		Pool:                  pool,
		OwnAddresses:          own,
		Ledger:                l,
		Rates:                 rates,
		USDTContract:          cfg.USDTContract,
		ConfirmationsRequired: cfg.Deposit.Confirmations,
		FactDepth:             cfg.Confirmations,
		Chain:                 tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(5*time.Second)),
		SpreadBps:             cfg.Deposit.USDTSpreadBps,
		USDTMin:               cfg.Deposit.USDTMin,
		USDTMax:               cfg.Deposit.USDTMax,
		MinDepositSun:         cfg.Deposit.MinDepositSun,
		Logger:                log,
	})
	if err != nil {
		return nil, err
	}
	sec, err := stages.KafkaOpts(cfg)
	if err != nil {
		return nil, err
	}
	runner, err := crediting.NewRunner(c, kafka.RunnerOptions{Brokers: cfg.KafkaBrokers, Logger: log, Registerer: reg, ClientOpts: sec})
	if err != nil || cfg.USDTRate.Source != config.RateSourceSunswapV3 {
		return runner, err
	}
	// The pool rate's metrics stay current without deposits: one read every RateSampleEvery.
	sample := stages.RunnerFunc(func(ctx context.Context) error {
		metrics.Sample(ctx, RateSampleEvery, log, "the USDT rate", func(ctx context.Context) error {
			_, _, err := rates.Rate(ctx)
			return err
		})
		return nil
	})
	return stages.Together(runner, sample), nil
}

// RateSampleEvery is how often the crediting stage reads the pool rate for its metrics.
const RateSampleEvery = 30 * time.Second

// Sweeper is the sweeping job, or nil when TREASURY_ADDRESS is unset (sweeping off).
func Sweeper(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	if cfg.Ledger.Treasury == "" {
		return nil, nil
	}
	if cfg.Deposit.HDKey == "" {
		return nil, errors.New("DEPOSIT_HD_KEY is not set: the sweeper derives the deposit keys from it")
	}
	treasury, err := tron.ParseAddress(cfg.Ledger.Treasury)
	if err != nil {
		return nil, fmt.Errorf("TREASURY_ADDRESS: %w", err)
	}
	keys, err := sweep.NewKeys(cfg.Deposit.HDKey)
	if err != nil {
		return nil, fmt.Errorf("DEPOSIT_HD_KEY: %w", err)
	}
	node := tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(10*time.Second))
	o := sweep.Options{
		Pool: pool, Node: node, Keys: keys,
		Treasury: treasury, USDTContract: cfg.USDTContract, MinTRXSun: cfg.Ledger.SweepMinSun,
		Every: cfg.Ledger.SweepEvery, Logger: log, Registerer: reg,
	}
	if cfg.Ledger.SweepSignerKey != "" {
		k, err := tron.ParsePrivateKey(cfg.Ledger.SweepSignerKey)
		if err != nil {
			return nil, errors.New("SWEEP_SIGNER_KEY is not a hex private key") // never echo a key
		}
		var pools []tron.Address
		if cfg.Ledger.SweepPoolAddress != "" {
			a, err := tron.ParseAddress(cfg.Ledger.SweepPoolAddress)
			if err != nil {
				return nil, fmt.Errorf("SWEEP_POOL_ADDRESS: %w", err)
			}
			pools = append(pools, a)
		}
		// Checked on chain now (a key that can do more stops the stage on mainnet) and
		// every minute while the sweeper runs.
		if o.EnergyPool, err = stages.Signers(context.Background(), cfg, node, "sweeper", pools, []tron.PrivateKey{k}, log, reg, nil); err != nil {
			return nil, err
		}
	}
	return sweep.New(o)
}
