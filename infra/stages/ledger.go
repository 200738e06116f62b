package stages

// Wiring of the ledger (issue 4): the ledger itself, the USDT rate, the deposit address
// rotation policy, the edge modules GET /v1/balance and GET /v1/deposit-addresses, the
// crediting consumer and the sweeper. docs/ledgerstore.md describes them.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/consumers/crediting"
	"rental/edge"
	"rental/infra/config"
	"rental/infra/deposits"
	"rental/infra/kafka"
	"rental/infra/ledgerstore"
	"rental/infra/orderstore"
	"rental/infra/pricestore"
	"rental/infra/sweep"
	"rental/infra/tron"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// Ledger is the ledger with the configured balance.low rule. estimated_orders_remaining is
// priced from the operator's price model (1 h energy in the current day-part, 65,000 units:
// one USDT transfer), falling back to BALANCE_LOW_ORDER_SUN until the model has been read or
// when it has no such row.
func Ledger(cfg config.Config, pool *pgxpool.Pool) (*ledgerstore.Ledger, error) {
	prices := &modelOrderPrice{models: pricestore.New(pool), network: cfg.Network,
		fallback: ledgerstore.FixedOrderPrice(cfg.Ledger.OrderSun)}
	prices.refresh()
	return ledgerstore.New(pool, ledgerstore.Options{
		Network:         cfg.Network,
		LowThresholdSun: cfg.Ledger.LowThresholdSun,
		Prices:          prices,
	})
}

// ReferenceOrderEnergy is the size of the reference order of estimated_orders_remaining.
const ReferenceOrderEnergy = 65_000

// modelOrderPrice prices the reference order from the stored price model. It never reads
// the database in the caller's path: the ledger asks for the price inside the order's
// transaction, and a second pool connection taken there could starve the pool under load.
// A stale model (older than a minute) is re-read in the background.
type modelOrderPrice struct {
	models   *pricestore.Store
	network  network.Network
	fallback ledgerstore.OrderPricer

	mu      sync.Mutex
	model   pricing.Model
	ok      bool
	read    time.Time
	reading bool
}

func (p *modelOrderPrice) refresh() {
	p.mu.Lock()
	if p.reading {
		p.mu.Unlock()
		return
	}
	p.reading = true
	p.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := p.models.Load(ctx, p.network)
		p.mu.Lock()
		if err == nil {
			p.model, p.ok = m, true
		}
		p.read, p.reading = time.Now(), false
		p.mu.Unlock()
	}()
}

// OrderSun implements ledgerstore.OrderPricer.
func (p *modelOrderPrice) OrderSun(ctx context.Context) (int64, error) {
	now := time.Now()
	p.mu.Lock()
	m, ok, stale := p.model, p.ok, now.Sub(p.read) > time.Minute
	p.mu.Unlock()
	if stale {
		p.refresh()
	}
	if ok {
		for _, r := range m.Rows {
			if r.Key() != (pricing.BookKey{Resource: pricing.Energy, Tier: pricing.Tier1h}) || len(m.DayParts) == 0 {
				continue
			}
			price := r.BasePrice
			if r.FollowsSchedule {
				v, err := pricing.ApplyBPS(r.BasePrice, m.DayParts[m.PartAt(now)].FactorBPS)
				if err != nil {
					break
				}
				price = v
			}
			return (int64(price)*ReferenceOrderEnergy + 99) / 100, nil // centisun -> SUN, rounded up
		}
	}
	return p.fallback.OrderSun(ctx)
}

// USDTRate is the USDT rate source: the fixed USDT_RATE_SUN (source fixed_env), cached 60 s.
// With USDT_RATE_SUN unset there is no rate: rate_now is null and USDT deposits are held.
func USDTRate(cfg config.Config) deposits.RateSource {
	return &deposits.CachedRate{Source: deposits.FixedRate{SunPerUSDT: cfg.Ledger.USDTRateSun}}
}

// RotationPolicy is the configured deposit address rotation policy.
func RotationPolicy(cfg config.Config) deposits.RotationPolicy {
	return deposits.RotationPolicy{
		MinIntervalDays: cfg.Ledger.RotationMinDays, MaxPerWindow: cfg.Ledger.RotationMax,
		WindowDays: cfg.Ledger.RotationWindow, RetiredCreditDays: cfg.Ledger.RetiredCreditDays,
	}
}

// DepositStore is the deposit address store of cfg, announcing new addresses
// (deposit_address.rotated).
func DepositStore(cfg config.Config, pool *pgxpool.Pool) (*deposits.Store, error) {
	if cfg.Deposit.HDKey == "" {
		return nil, errors.New("DEPOSIT_HD_KEY is not set: the BIP32 root (xpub, xprv or hex seed) deposit addresses derive from")
	}
	deriver, err := deposits.NewDeriver(cfg.Deposit.HDKey)
	if err != nil {
		return nil, fmt.Errorf("DEPOSIT_HD_KEY: %w", err)
	}
	return deposits.NewStore(pool, deposits.Options{
		Deriver:       deriver,
		USDTContract:  cfg.USDTContract.String(),
		Confirmations: cfg.Deposit.Confirmations,
		SpreadBps:     cfg.Deposit.USDTSpreadBps,
		MinUSDT:       cfg.Deposit.USDTMin,
		MaxUSDT:       cfg.Deposit.USDTMax,
		Network:       cfg.Network,
	})
}

// LedgerEdge is the ledger's part of the edge.
type LedgerEdge struct {
	Accounts edge.AccountLedger // Options.Account.Ledger: balances and totals of GET /v1/account
	Balance  edge.Module        // GET /v1/balance
	Deposits edge.Module        // GET /v1/deposit-addresses
}

// ledgerEdge builds the ledger's edge modules on the edge's deposit store.
func ledgerEdge(cfg config.Config, pool *pgxpool.Pool, store *deposits.Store, log *slog.Logger) (LedgerEdge, error) {
	l, err := Ledger(cfg, pool)
	if err != nil {
		return LedgerEdge{}, err
	}
	bal, err := edge.NewBalance(l)
	if err != nil {
		return LedgerEdge{}, err
	}
	dep, err := edge.NewDepositAddresses(edge.DepositAddressesOptions{
		Store: store, Rates: USDTRate(cfg), Policy: RotationPolicy(cfg), Logger: log,
	})
	if err != nil {
		return LedgerEdge{}, err
	}
	return LedgerEdge{Accounts: edge.LedgerAccounts{Ledger: l}, Balance: bal, Deposits: dep}, nil
}

// Crediting is the crediting consumer (consumer group "crediting" on chain.facts.v1). It
// waits for DEPOSIT_CONFIRMATIONS itself when chainwatch runs shallower (CONFIRMATIONS).
func Crediting(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (Runner, error) {
	l, err := Ledger(cfg, pool)
	if err != nil {
		return nil, err
	}
	own := append([]tron.Address(nil), cfg.PoolAddresses...)
	if t, err := tron.ParseAddress(cfg.Ledger.Treasury); err == nil {
		own = append(own, t)
	}
	c, err := crediting.New(crediting.Options{
		Pool:                  pool,
		OwnAddresses:          own,
		Ledger:                l,
		Rates:                 USDTRate(cfg),
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
	return crediting.NewRunner(c, kafka.RunnerOptions{Brokers: cfg.KafkaBrokers, Logger: log, Registerer: reg})
}

// Sweeper is the sweeping job, or nil when TREASURY_ADDRESS is unset (sweeping off).
func Sweeper(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (Runner, error) {
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
	o := sweep.Options{
		Pool: pool, Node: tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(10*time.Second)), Keys: keys,
		Treasury: treasury, USDTContract: cfg.USDTContract, MinTRXSun: cfg.Ledger.SweepMinSun,
		Every: cfg.Ledger.SweepEvery, Logger: log, Registerer: reg,
	}
	if cfg.Ledger.SweepPoolKey != "" {
		k, err := tron.ParsePrivateKey(cfg.Ledger.SweepPoolKey)
		if err != nil {
			return nil, fmt.Errorf("SWEEP_POOL_KEY: %w", err)
		}
		o.EnergyPool = &k
	}
	return sweep.New(o)
}

// InvariantChecks are the ledger invariants checks with the order pipeline's view of which
// holds are live (orderstore.LiveRefs), for the admin command and tests.
func InvariantChecks() ledgerstore.CheckOptions {
	return ledgerstore.CheckOptions{LiveRefs: func(ctx context.Context, q ledgerstore.Querier, refs []string) (map[string]bool, error) {
		return orderstore.LiveRefs(ctx, q, refs)
	}}
}
