// Package edgestage wires the API edge (package edge) from configuration: every module it
// serves, the stores behind them and the status probes.
package edgestage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"rental/edge"
	"rental/edge/dashboard"
	"rental/infra/accounts"
	"rental/infra/config"
	"rental/infra/deposits"
	"rental/infra/health"
	"rental/infra/idempotency"
	"rental/infra/orderstore"
	"rental/infra/ratelimit"
	"rental/infra/reqsign/replay"
	"rental/infra/sessions"
	"rental/infra/signup"
	"rental/infra/sigstore"
	"rental/infra/stages"
	"rental/infra/stages/acceptstage"
	"rental/schemas/pricing"
)

// Edge is the API edge with everything it serves: status probes, API keys and request
// signing, signup and bootstrap tokens, dashboard sessions, rate limits and idempotency.
// Redis keys of every edge component start with "rental:".
func Edge(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	const redisPrefix = "rental:"
	if len(cfg.Auth.MasterKey) == 0 {
		return nil, errors.New("API_KEY_MASTER_KEY is not set: 64 hex characters (openssl rand -hex 32) encrypting API key secrets at rest")
	}
	if cfg.Deposit.XPub == "" {
		return nil, errors.New("DEPOSIT_XPUB is not set: the extended public key (xpub) of m/44'/195'/0'/0 deposit addresses derive from")
	}
	if cfg.Deposit.HDKey != "" {
		return nil, errors.New("DEPOSIT_HD_KEY is set in the edge's environment: the private deposit root belongs to the sweeper alone; give the edge DEPOSIT_XPUB only")
	}

	store, err := accounts.New(pool, accounts.Options{MasterKey: cfg.Auth.MasterKey, PreviousMasterKey: cfg.Auth.PreviousMasterKey, MaxActiveKeys: cfg.Auth.MaxActiveKeys})
	if err != nil {
		return nil, err
	}
	keys, err := edge.NewKeyAuthenticator(edge.KeyAuthOptions{
		Network:    cfg.Network,
		Keys:       store,
		Replay:     replay.New(rdb, redisPrefix, 0),
		Signatures: sigstore.New(pool, 0), // outlives a Redis loss (docs/auth.md)
		Logger:     log,
		CacheTTL:   cfg.Auth.KeyCacheTTL,
	})
	if err != nil {
		return nil, err
	}

	challenges, err := signup.New(pool, signup.Options{Brand: cfg.Brand, Host: cfg.Host, Network: cfg.Network})
	if err != nil {
		return nil, err
	}
	limiter := signup.NewChallengeLimiter(rdb, signup.LimiterOptions{
		KeyPrefix:  redisPrefix,
		PerIP:      redis_rate.Limit{Rate: cfg.Signup.ChallengesPerMinuteIP, Burst: min(cfg.Signup.ChallengesPerMinuteIP, 10), Period: time.Minute},
		PerAddress: redis_rate.Limit{Rate: cfg.Signup.ChallengesPerMinuteAddress, Burst: cfg.Signup.ChallengesPerMinuteAddress, Period: time.Minute},
		AddressCeiling: redis_rate.Limit{Rate: cfg.Signup.ChallengesPerMinuteCeiling, Burst: max(cfg.Signup.ChallengesPerMinuteCeiling/2, 1),
			Period: time.Minute},
	})
	deriver, err := deposits.NewPublicDeriver(cfg.Deposit.XPub)
	if err != nil {
		return nil, fmt.Errorf("DEPOSIT_XPUB: %w", err)
	}
	depositStore, err := deposits.NewStore(pool, deposits.Options{
		Deriver:       deriver,
		USDTContract:  cfg.USDTContract.String(),
		Confirmations: cfg.Deposit.Confirmations,
		SpreadBps:     cfg.Deposit.USDTSpreadBps,
		MinUSDT:       cfg.Deposit.USDTMin,
		MaxUSDT:       cfg.Deposit.USDTMax,
		Network:       cfg.Network, // announces new addresses (deposit_address.rotated)
	})
	if err != nil {
		return nil, err
	}
	sessionStore, err := sessions.NewStore(pool, sessions.Options{Idle: cfg.Signup.SessionIdle, Absolute: cfg.Signup.SessionAbsolute})
	if err != nil {
		return nil, err
	}
	signupAPI, err := edge.NewSignup(edge.SignupOptions{
		Brand: cfg.Brand, Network: cfg.Network, Challenges: challenges, Limiter: limiter,
		Accounts: store, Deposits: depositStore, MinDepositSun: cfg.Deposit.MinDepositSun,
	})
	if err != nil {
		return nil, err
	}
	sessionAPI, err := edge.NewSession(edge.SessionOptions{Network: cfg.Network, Challenges: challenges, Sessions: sessionStore, Accounts: store})
	if err != nil {
		return nil, err
	}
	ledgerAPI, err := ledgerEdge(cfg, pool, depositStore, log, reg) // infra/stages/ledger.go
	if err != nil {
		return nil, err
	}
	// The account renderer and the limits must be the same values for GET and PATCH
	// /v1/account, so both take these two.
	sources := edge.AccountSources{Brand: cfg.Brand, Network: cfg.Network, Deposits: edge.DepositAddressRefs{Store: depositStore},
		Ledger: ledgerAPI.Accounts,
		Limits: edge.AccountLimits{MaxOrderEnergy: cfg.Orders.MaxOrderEnergy, MaxBatchReceivers: cfg.Batches.MaxReceivers}}
	limits := edge.RateLimits{Quota: ratelimit.Quota{Daily: cfg.Auth.QuotaDaily, Monthly: cfg.Auth.QuotaMonthly}}
	if n := cfg.Auth.RateLimitIP; n > 0 {
		limits.IP = redis_rate.Limit{Rate: n, Burst: n, Period: time.Second}
	}
	patchAPI, err := edge.NewAccountPatch(edge.AccountPatchOptions{Accounts: store, Sources: sources, RateLimits: limits})
	if err != nil {
		return nil, err
	}

	idem := idempotency.New(pool, idempotency.Options{})
	prices, snapshots, err := acceptstage.LivePrices(cfg, pool, rdb, log)
	if err != nil {
		return nil, err
	}
	pricingAPI, err := pricingModule(pool, prices, idem, log)
	if err != nil {
		return nil, err
	}
	chainAPIs, err := chainModules(cfg, pool, rdb, redisPrefix, snapshots) // market.go
	if err != nil {
		return nil, err
	}
	acc, err := acceptstage.Acceptance(cfg, pool, prices, nil, idem, log, reg)
	if err != nil {
		return nil, err
	}
	ordersAPI, err := ordersModule(pool, acc, idem)
	if err != nil {
		return nil, err
	}
	transactionsAPI, err := transactionsModule(cfg, acc) // transactions.go
	if err != nil {
		return nil, err
	}

	batchesAPI, err := batchesModule(cfg, pool, acc, idem, log)
	if err != nil {
		return nil, err
	}

	budgets := ratelimit.New(rdb, redisPrefix)
	webhooksAPI, err := webhooksModule(cfg, pool, idem, budgets)
	if err != nil {
		return nil, err
	}
	subscriptionsAPI, err := subscriptionsModule(cfg, pool, prices, idem, log)
	if err != nil {
		return nil, err
	}

	// The status supply figure is the 1 h energy depth of the pricer's order book: what
	// GET /v1/prices shows as available_energy, on either network (own pools, providers).
	checker := health.NewChecker(health.Options{
		Database: health.NewPostgres(pool),
		Supply:   snapshotSupply{snapshots},
		Delivery: orderstore.DeliveryStats{Pool: pool},
		Backlog:  acc.Backlog(),
		Custody:  orderstore.DeliveryStats{Pool: pool},
		Logger:   log,
	})

	page, err := dashboard.New(dashboard.Config{Brand: cfg.Brand, Network: string(cfg.Network), ExplorerTxURL: cfg.ExplorerTxURL})
	if err != nil {
		return nil, err
	}
	server, err := edge.New(edge.Options{
		Logger:         log,
		Registerer:     reg,
		Network:        cfg.Network,
		Brand:          cfg.Brand,
		Addr:           cfg.HTTPAddr,
		Status:         checker,
		ShutdownGrace:  cfg.ShutdownGrace,
		Keys:           keys,
		Bootstrap:      signupAPI.Bootstrap(),
		Sessions:       sessionAPI.Authenticator(),
		Modules:        append([]edge.Module{signupAPI, sessionAPI, patchAPI, pricingAPI, webhooksAPI, ordersAPI, transactionsAPI, batchesAPI, subscriptionsAPI, ledgerAPI.Balance, ledgerAPI.Deposits}, chainAPIs...),
		TrustedProxies: cfg.Auth.TrustedProxies,
		IPv6SourceBits: cfg.Auth.IPv6SourceBits,
		Limiter:        budgets,
		RateLimits:     limits,
		Accounts:       store,
		Idempotency:    idem,
		MaxActiveKeys:  cfg.Auth.MaxActiveKeys,
		Account:        sources,
		Dashboard:      page,
	})
	if err != nil {
		return nil, err
	}
	return stages.Together(server, snapshots), nil
}

// snapshotSupply is health.SupplySource over the pricer's snapshot: the energy sellable now
// for 1 h is the 1 h energy book's depth. Without a fresh snapshot nothing can be sold, and
// the status says the source is unreachable.
type snapshotSupply struct{ src pricing.SnapshotSource }

func (s snapshotSupply) AvailableEnergy(context.Context) (int64, error) {
	snap, ok := s.src.Current()
	if !ok {
		return 0, errors.New("no fresh price snapshot (is the pricer running?)")
	}
	return snap.Table.AvailableEnergy, nil
}
