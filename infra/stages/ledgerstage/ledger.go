// Package ledgerstage wires the ledger (issue 4) for every stage that charges or credits
// (the edge, the order processor, the subscription watcher, crediting, the admin command):
// the ledger itself with its balance.low rule, the USDT rate, the deposit store and the
// deposit address rotation policy. The edge modules GET /v1/balance and GET
// /v1/deposit-addresses are in edgestage, the crediting consumer and the sweeper in
// creditstage. docs/ledgerstore.md describes them.
package ledgerstage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/config"
	"rental/infra/deposits"
	"rental/infra/ledgerstore"
	"rental/infra/orderstore"
	"rental/infra/pricestore"
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
	key := cfg.Deposit.XPub
	if key == "" {
		key = cfg.Deposit.HDKey
	}
	if key == "" {
		return nil, errors.New("DEPOSIT_XPUB (or DEPOSIT_HD_KEY) is not set: the BIP32 key deposit addresses derive from")
	}
	deriver, err := deposits.NewDeriver(key)
	if err != nil {
		return nil, fmt.Errorf("DEPOSIT_XPUB: %w", err)
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

// InvariantChecks are the ledger invariants checks with the order pipeline's view of which
// holds are live (orderstore.LiveRefs), for the admin command and tests.
func InvariantChecks() ledgerstore.CheckOptions {
	return ledgerstore.CheckOptions{LiveRefs: func(ctx context.Context, q ledgerstore.Querier, refs []string) (map[string]bool, error) {
		return orderstore.LiveRefs(ctx, q, refs)
	}}
}
