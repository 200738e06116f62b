// Command devstack runs the whole service in one process on embedded defaults (`make run`):
// an embedded Kafka broker (kfake) with its data under DATA_DIR, the TRON node simulator,
// a simulated market provider (and three more for the market board), the schema
// migrations, the outbox relay, the chain follower, the pricer, the market sampler, the
// order processor, the batch processor, the subscription watcher and the API edge. Postgres and
// Redis are real local servers. When either is unreachable it waits for it with backoff
// (stages.WaitFor: one line naming the fix when the wait starts, one when it answers) and
// starts the stages then. Each stage logs one line when it is up.
//
// Dev-only secrets live here and nowhere else: the simulator's public faucet key, a stake
// pool key derived from a fixed phrase, and (when unset) a well-known API key master key and
// deposit HD seed. Production never runs this binary.
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"rental/infra/config"
	"rental/infra/deposits"
	"rental/infra/kafka"
	"rental/infra/metrics"
	"rental/infra/pg"
	"rental/infra/redisx"
	"rental/infra/stages"
	"rental/infra/stages/batchstage"
	"rental/infra/stages/chainstage"
	"rental/infra/stages/creditstage"
	"rental/infra/stages/edgestage"
	"rental/infra/stages/marketstage"
	"rental/infra/stages/orderflowstage"
	"rental/infra/stages/paystage"
	"rental/infra/stages/pricerstage"
	"rental/infra/stages/relaystage"
	"rental/infra/stages/substage"
	"rental/infra/stages/webhookstage"
	"rental/infra/supply"
	"rental/infra/tron"
	"rental/infra/tronsim"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("devstack stopped", "stage", "devstack", "err", err)
		os.Exit(1)
	}
}

// devPoolKey is the dev stack's own stake pool: a well-known key, never used on a real chain.
func devPoolKey() tron.PrivateKey { return devKey("rental devstack stake pool 0 (dev only)") }

// devConfirmationDepth is the dev stack's CONFIRMATIONS and DEPOSIT_CONFIRMATIONS when they
// are unset. The simulator is one producer that never forks unless told to (POST /sim/fork),
// so mainnet's 19 blocks (about a minute at 3 s) guard against nothing here and only make a
// newcomer wait: at depth 1 a deposit is credited and a first order confirmed within a few
// blocks (docs/integrating.md). Setting either variable keeps its value (the chaos soak
// sets CONFIRMATIONS to fork past it).
const devConfirmationDepth = 1

// devDepth applies devConfirmationDepth to the depths the environment leaves unset.
func devDepth(cfg *config.Config, lookup func(string) (string, bool)) {
	if _, set := lookup("CONFIRMATIONS"); !set {
		cfg.Confirmations = devConfirmationDepth
	}
	if _, set := lookup("DEPOSIT_CONFIRMATIONS"); !set {
		cfg.Deposit.Confirmations = devConfirmationDepth
	}
}

// devProcessorSigner and devSweeperSigner hold the dev pool's delegate-only permission.
func devProcessorSigner() tron.PrivateKey {
	return devKey("rental devstack order processor signer (dev only)")
}
func devSweeperSigner() tron.PrivateKey { return devKey("rental devstack sweeper signer (dev only)") }

// devChainSetup makes the simulated chain as an operator would on mainnet: the signers'
// accounts exist (a chain persisted before they did gets them seeded), and the pool's
// owner grants them its delegate-only permission.
func devChainSetup(sim *tronsim.Sim, pool tron.PrivateKey, signers ...tron.PrivateKey) error {
	addrs := make([]tron.Address, len(signers))
	for i, k := range signers {
		addrs[i] = k.Address()
		if sim.ActivePermissions(k.Address()) == nil {
			if err := sim.SeedAccount(tronsim.GenesisAccount{Address: k.Address(), BalanceSun: 10_000 * 1_000_000}); err != nil {
				return err
			}
		}
	}
	return sim.GrantDelegates(pool, addrs...)
}

// devKey derives a well-known dev-only key from a phrase.
func devKey(phrase string) tron.PrivateKey {
	seed := sha256.Sum256([]byte(phrase))
	return tron.PrivateKeyFromBytes(seed[:])
}

func run(log *slog.Logger) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stage := func(name string) *slog.Logger { return log.With("stage", name) }
	dlog := stage("devstack")
	devDepth(&cfg, os.LookupEnv)

	// Real services first, each waited for with backoff (one line naming the fix when the
	// wait starts, one when it answers). Only reaching Postgres is retried: a migration
	// that fails on a server that answers is a defect to see at once, not to wait out.
	if _, err := stages.WaitFor(ctx, dlog, "postgres", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, pg.EnsureDatabase(ctx, cfg.DatabaseURL)
	}); err != nil {
		return err
	}
	applied, err := pg.Migrate(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	stage("migrate").Info(fmt.Sprintf("schema up to date (%d migrations applied now)", len(applied)), "database", pg.Redact(cfg.DatabaseURL))
	pool, err := pg.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	rdb, err := stages.WaitFor(ctx, dlog, "redis", func(ctx context.Context) (*redis.Client, error) {
		return redisx.Connect(ctx, cfg.RedisURL)
	})
	if err != nil {
		return err
	}
	defer rdb.Close()

	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("DATA_DIR %s: %w", cfg.DataDir, err)
	}
	if len(cfg.KafkaBrokers) == 0 {
		return errors.New("KAFKA_BROKERS is empty: the dev stack's broker listens on its first address")
	}
	broker, err := kafka.StartBroker(kafka.BrokerOptions{
		Addr:    cfg.KafkaBrokers[0],
		DataDir: filepath.Join(cfg.DataDir, "kafka"),
		Logger:  log,
	})
	if err != nil {
		return err
	}

	// The simulator stands in for java-tron; the stages reach it over HTTP like a real node.
	// pool0's owner key stays in this chain set-up: it grants the processor's and the
	// sweeper's signer keys a delegate-only permission (docs/custody.md), and no stage
	// ever receives it.
	pool0 := devPoolKey()
	processorSigner, sweeperSigner := devProcessorSigner(), devSweeperSigner()
	providerKey := devKey("rental devstack simulated provider (dev only)")
	sim, err := tronsim.New(tronsim.Options{
		Network:       cfg.Network,
		BlockInterval: cfg.SimBlockInterval,
		// The follower reads nothing above the solidified block: in dev it trails the
		// head by CONFIRMATIONS, not java-tron's 19.
		SolidLag: max(1, int64(cfg.Confirmations)),
		DataFile: filepath.Join(cfg.DataDir, "tronsim.json"),
		Genesis: []tronsim.GenesisAccount{{
			Address:        pool0.Address(),
			BalanceSun:     1_000_000 * 1_000_000,
			StakeEnergySun: 50_000_000 * 1_000_000,
		}, {
			// The signers' own accounts pay receiver and deposit-address activations and
			// deep reserve rentals.
			Address:    processorSigner.Address(),
			BalanceSun: 100_000 * 1_000_000,
		}, {
			Address:    sweeperSigner.Address(),
			BalanceSun: 10_000 * 1_000_000,
		}, {
			Address:           providerKey.Address(),
			BalanceSun:        1_000 * 1_000_000,
			StakeEnergySun:    20_000_000 * 1_000_000,
			StakeBandwidthSun: 1_000_000 * 1_000_000,
		}},
		Logger: log,
	})
	if err != nil {
		broker.Close()
		return err
	}
	defer sim.Close()
	cfg.TronNodeURL = "http://" + cfg.SimAddr
	cfg.USDTContract = sim.USDTContract()
	devUSDTRate(&cfg)
	if len(cfg.SignerKeys) == 0 {
		if err := devChainSetup(sim, pool0, processorSigner, sweeperSigner); err != nil {
			return err
		}
		cfg.SignerKeys = []tron.PrivateKey{processorSigner}
		cfg.PoolAddresses = []tron.Address{pool0.Address()}
	}
	if len(cfg.Auth.MasterKey) == 0 {
		mk := sha256.Sum256([]byte("rental devstack API key master key (dev only)"))
		cfg.Auth.MasterKey = mk[:]
		dlog.Warn("API_KEY_MASTER_KEY unset: using the dev stack's well-known key; never use this data in production")
	}
	if cfg.Deposit.HDKey == "" {
		cfg.Deposit.HDKey = deposits.DevSeedHex
		dlog.Warn("DEPOSIT_HD_KEY unset: deposit addresses derive from the public dev seed")
	}
	if cfg.Pricing.DeepContract.IsZero() {
		cfg.Pricing.DeepContract = tronsim.DeepReserveContract()
	}
	if cfg.ChainStartBlock < 0 {
		cfg.ChainStartBlock = 0 // the simulated chain is short: follow it from genesis
	}
	cfg.Webhook.AllowLoopback = true // webhook receivers in development run on this machine

	// The broker stops after every stage that uses it, so their last offset commits and
	// produces on shutdown reach it (a restart then re-reads nothing).
	defer broker.Close()
	broker.LogUp()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sim.Serve(gctx, cfg.SimAddr) })
	// The simulated provider sells and delivers from its own stake on the simulator.
	provider := supply.NewProviderServer("simmarket", supply.DefaultOffers(cfg.Network)).WithChain(supply.ProviderChain{
		Node: tron.NewClient(cfg.TronNodeURL), Key: providerKey, LockCap: cfg.Network.MaxLockPeriodBlocks()})
	g.Go(func() error { return provider.Serve(gctx, cfg.Pricing.ProviderSimAddr, stage("provider")) })

	producer, err := stages.KafkaProducer(gctx, cfg)
	if err != nil {
		stop()
		if gerr := g.Wait(); gerr != nil {
			// A server that failed to start (its address taken) cancelled the wait for
			// Kafka: its error is the cause.
			return fmt.Errorf("%w (and so: %v)", gerr, err)
		}
		return err
	}
	defer producer.Close()

	reg := metrics.NewRegistry()
	relay, err := relaystage.Relay(cfg, pool, producer, log, reg)
	if err != nil {
		return err
	}
	follower, err := chainstage.Chainwatch(cfg, pool, log, reg)
	if err != nil {
		return err
	}
	prices, err := pricerstage.Pricer(cfg, pool, rdb, producer, log, reg)
	if err != nil {
		return err
	}
	// The edge derives deposit addresses from the public key only; the private root stays
	// with the sweeper (docs/custody.md).
	edgeCfg := cfg
	edgeCfg.Deposit.HDKey = ""
	if edgeCfg.Deposit.XPub == "" {
		d, err := deposits.NewDeriver(cfg.Deposit.HDKey)
		if err != nil {
			return fmt.Errorf("DEPOSIT_HD_KEY: %w", err)
		}
		edgeCfg.Deposit.XPub = d.XPub()
	}
	api, err := edgestage.Edge(edgeCfg, pool, rdb, log, reg)
	if err != nil {
		return err
	}
	deliverer, err := webhookstage.WebhookDeliverer(cfg, pool, log, reg)
	if err != nil {
		return err
	}
	g.Go(func() error { return deliverer.Run(gctx) })
	credit, err := creditstage.Crediting(cfg, pool, log, reg) // deposits -> ledger (docs/ledger.md)
	if err != nil {
		return err
	}
	g.Go(func() error { return credit.Run(gctx) })
	if cfg.Ledger.Treasury != "" && cfg.Ledger.SweepSignerKey == "" {
		// The dev pool lends energy for USDT sweeps, signed for by the sweeper's own key.
		cfg.Ledger.SweepPoolAddress, cfg.Ledger.SweepSignerKey = pool0.Address().String(), sweeperSigner.Hex()
	}
	if sweeper, err := creditstage.Sweeper(cfg, pool, log, reg); err != nil {
		return err
	} else if sweeper != nil {
		g.Go(func() error { return sweeper.Run(gctx) })
	}
	processor, err := orderflowstage.Processor(cfg, pool, log, reg)
	if err != nil {
		return err
	}
	g.Go(func() error { return processor.Run(gctx) })
	batchProcessor, err := batchstage.Batches(cfg, pool, rdb, log, reg)
	if err != nil {
		return err
	}
	g.Go(func() error { return batchProcessor.Run(gctx) })
	if _, set := os.LookupEnv("SUBSCRIPTION_CHECK_INTERVAL"); !set {
		cfg.Subscriptions.CheckEvery = 3 * time.Second // development: refills react within a few seconds
	}
	watcher, err := substage.SubscriptionWatcher(cfg, pool, rdb, log, reg) // auto-refill (docs/subscriptions.md)
	if err != nil {
		return err
	}
	g.Go(func() error { return watcher.Run(gctx) })
	if payments, err := paystage.Payments(cfg, pool, rdb, log, reg); err != nil { // pay by transfer (docs/pricing.md)
		return err
	} else if payments != nil {
		g.Go(func() error { return payments.Run(gctx) })
	}
	// The market board's sampler, and its simulated providers unless MARKET_FEEDS names
	// real ones (docs/market.md).
	if cfg.Market.SimProviders {
		g.Go(func() error { return marketstage.DevMarketProviders(gctx, stage("market-providers")) })
	}
	marketWatch, err := marketstage.MarketWatch(cfg, pool, rdb, log, reg)
	if err != nil {
		return err
	}
	g.Go(func() error { return marketWatch.Run(gctx) })
	g.Go(func() error { return prices.Run(gctx) })
	g.Go(func() error { return relay.Run(gctx) })
	g.Go(func() error { return follower.Run(gctx) })
	g.Go(func() error { return api.Run(gctx) })
	// The operations listener serves /healthz and /readyz as each stage binary does; ready
	// when every dependency of the stages running here answers.
	ops := &stages.Process{Ctx: gctx, Cfg: cfg, Pool: pool}
	defer ops.Close()
	ready, err := stages.ReadinessOf(ops, stages.NeedsOf("relay", "chainwatch", "pricer", "edge", "webhooks",
		"crediting", "orderflow", "batches", "subscriptions"))
	if err != nil {
		stop()
		_ = g.Wait()
		return err
	}
	g.Go(func() error {
		return metrics.Run(gctx, cfg.MetricsAddr, reg, stage("metrics"), stages.OpsRoutes(ready)...)
	})

	dlog.Info(fmt.Sprintf("dev stack up: API http://%s, TRON node http://%s, Kafka %s, data in %s",
		cfg.HTTPAddr, cfg.SimAddr, broker.Addr(), cfg.DataDir), "pool", pool0.Address().String())
	if err := g.Wait(); err != nil {
		return err
	}
	dlog.Info("dev stack stopped cleanly")
	return nil
}

// devUSDTRate points the USDT rate at the simulator's SunSwap v3 pool (POST /sim/swap sets
// its price) with a one-minute window, so the rate follows a price change within a few
// minutes; USDT_RATE_SOURCE or USDT_RATE_SUN in the environment keep their meaning.
func devUSDTRate(cfg *config.Config) {
	_, source := os.LookupEnv("USDT_RATE_SOURCE")
	if source || cfg.Ledger.USDTRateSun != 0 {
		return
	}
	r := &cfg.USDTRate
	r.Source, r.Pool, r.WTRX = config.RateSourceSunswapV3, tronsim.SwapPoolContract(), tronsim.WTRXContract()
	if _, set := os.LookupEnv("USDT_RATE_WINDOW"); !set {
		r.Window = time.Minute
	}
	if r.MinLiquidity == nil {
		r.MinLiquidity = big.NewInt(tronsim.DefaultPoolLiquidity / 2)
	}
}
