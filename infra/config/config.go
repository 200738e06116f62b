// Package config reads the service configuration from the environment. Every variable has a
// development default so that `make run` works on a fresh machine; production sets them.
// The README lists every variable; keep the two in step.
package config

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"rental/infra/tron"
	"rental/schemas/network"
)

// Config is the whole configuration. Stages take the parts they need; nothing reads the
// environment after Load.
type Config struct {
	Network network.Network // NETWORK
	Brand   string          // BRAND, used in webhook User-Agent and signup messages
	Host    string          // PUBLIC_HOST, the domain bound into signed challenges
	// ExplorerTxURL is the block explorer page of a transaction for the dashboard's links
	// (EXPLORER_TX_URL); "{tx}" is replaced by the transaction id. The default is
	// tronscan's page for the network.
	ExplorerTxURL string

	DatabaseURL  string   // DATABASE_URL
	RedisURL     string   // REDIS_URL
	KafkaBrokers []string // KAFKA_BROKERS, comma separated
	TronNodeURL  string   // TRON_NODE_URL, java-tron full node HTTP API

	HTTPAddr    string // HTTP_ADDR, the edge's listen address
	MetricsAddr string // METRICS_ADDR, Prometheus /metrics listener of a stage; "" disables

	// PoolAddresses are the service's own stake pools (POOL_ADDRESSES, comma-separated
	// Base58Check); the status endpoint's supply figure is read from them.
	PoolAddresses []tron.Address
	// SignerKeys sign the pools' delegations and reclaims (SIGNER_KEYS, comma-separated
	// hex private keys). Each holds only a delegate permission of the pools, found on
	// chain (infra/custody, docs/custody.md); never a pool's owner key. Secret: only the
	// order processor reads them and nothing prints them. The first key's own account pays
	// receiver activations and deep reserve rentals.
	SignerKeys []tron.PrivateKey
	DataDir    string // DATA_DIR, embedded broker and simulator state (dev stack only)

	// Chain following.
	Confirmations  int           // CONFIRMATIONS, depth below the head a block is final at
	ChainPollEvery time.Duration // CHAIN_POLL_INTERVAL
	// ChainStartBlock is where the follower starts when it has no cursor yet
	// (CHAIN_START_BLOCK); -1 means the confirmed head, skipping history.
	ChainStartBlock int64
	// USDTContract is the TRC-20 USDT contract followed and accepted (USDT_CONTRACT);
	// it defaults to the network's.
	USDTContract tron.Address

	// Simulator (dev stack only).
	SimAddr          string        // SIM_ADDR
	SimBlockInterval time.Duration // SIM_BLOCK_INTERVAL

	// Outbox relay.
	OutboxSweepEvery time.Duration // OUTBOX_SWEEP_INTERVAL
	OutboxPollEvery  time.Duration // OUTBOX_POLL_INTERVAL: how often the relay looks for new rows

	ShutdownGrace time.Duration // SHUTDOWN_GRACE

	// LogFormat is json or text (LOG_FORMAT); empty means the binary's default: json for
	// the stage binaries, text for the dev stack.
	LogFormat string
	// LogLevel is debug, info, warn or error (LOG_LEVEL, default info).
	LogLevel string

	// Kafka is how clients secure their connections to KAFKA_BROKERS.
	Kafka Kafka

	// Unknown lists the variables set in the environment that look like this service's
	// (they share a prefix with a variable it reads, such as KAFKA_ or WEBHOOK_) but that
	// it does not read: most often a misspelling. Stages log them as a warning at start.
	Unknown []string

	Auth    Auth
	Signup  Signup
	Deposit Deposit
	Ledger  Ledger
	Pricing Pricing
	Market  Market // market board sampler, address resources, transfer estimates (market.go)
	// USDTRate is the USDT deposit rate's source (usdtrate.go).
	USDTRate USDTRate
	// Processor tunes the order processor (processors/orderflow).
	Processor Processor
	Webhook   Webhook
	Orders    Orders
	Batches   Batches
	// Subscriptions configures the subscription endpoints and their watcher
	// (processors/subscriptions, docs/subscriptions.md).
	Subscriptions Subscriptions
	// Payments configures pay by transfer (payments.go).
	Payments Payments
}

// Kafka configures transport security to the Kafka cluster (infra/kafka.Security).
type Kafka struct {
	TLS                        bool   // KAFKA_TLS
	CAFile                     string // KAFKA_TLS_CA_FILE, PEM CA bundle; empty means the system roots
	CertFile, KeyFile          string // KAFKA_TLS_CERT_FILE, KAFKA_TLS_KEY_FILE: client certificate (mutual TLS)
	SASLMechanism              string // KAFKA_SASL_MECHANISM: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty = none
	SASLUsername, SASLPassword string // KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD (secret)
}

// Batches configures batch creation at the edge and the batch processor (docs/batches.md).
type Batches struct {
	// MaxReceivers is the account limit max_batch_receivers (MAX_BATCH_RECEIVERS, 1 to 100).
	MaxReceivers int
	// MaxTotalEnergy is the batch total-energy cap (BATCH_MAX_ENERGY): above it 2009.
	MaxTotalEnergy int64
	// MaxOpen is how many batches of one account may be processing (MAX_OPEN_BATCHES);
	// creation answers 1101 above it.
	MaxOpen int
	// Workers is how many receivers one batch processor replica places at once
	// (BATCH_WORKERS).
	Workers int
	// PlaceEvery is the least time between two placements of one worker
	// (BATCH_PLACE_INTERVAL, default 0: no throttle).
	PlaceEvery time.Duration
}

// Subscriptions configures auto-refill subscriptions.
type Subscriptions struct {
	// Available (SUBSCRIPTIONS_AVAILABLE, default true) is the plans' `available`: false
	// switches off creating subscriptions and changing rules (3021); reads, status and label
	// changes, DELETE and the watcher keep working.
	Available bool
	// CheckEvery (SUBSCRIPTION_CHECK_INTERVAL) is how often the watcher reads each live
	// subscription's address from the node.
	CheckEvery time.Duration
	// Grace (SUBSCRIPTION_BILLING_GRACE) is how long after a failed daily charge the
	// watcher keeps retrying it (grace_until).
	Grace time.Duration
	// RenewalLead (SUBSCRIPTION_RENEWAL_LEAD) is how long before a renewal subscription's
	// standing rental expires the next one is ordered.
	RenewalLead time.Duration
}

// Webhook configures webhook endpoints and their delivery (docs/webhooks.md).
type Webhook struct {
	// AllowLoopback (WEBHOOK_ALLOW_LOOPBACK) admits plain http:// URLs and loopback targets
	// (127.0.0.0/8, ::1). Dev stack and tests only; off by default.
	AllowLoopback bool
	// RetryDelays (WEBHOOK_RETRY_DELAYS, comma-separated durations) are the waits before
	// attempts 2, 3, ...; nil means the spec's schedule (15s,30s,3m,10m,20m,30m,1h,3h,6h).
	RetryDelays []time.Duration
	// MaxDrives (WEBHOOK_MAX_DRIVES) bounds the deliveries one replica makes at once, and
	// MaxDrivesPerAccount (WEBHOOK_MAX_DRIVES_PER_ACCOUNT) one account's share of them.
	MaxDrives, MaxDrivesPerAccount int
	// Ports (WEBHOOK_PORTS, comma-separated) are target ports allowed besides 443.
	Ports []uint16
	// TestsPerHour (WEBHOOK_TESTS_PER_HOUR) is each account's budget of test calls
	// (POST /v1/webhooks/{id}/test), burst a third of it; default 30.
	TestsPerHour int
}

// Orders configures order creation at the edge (docs/orders.md, "API").
type Orders struct {
	// MaxInFlight is how many orders an account may have waiting for delivery (created,
	// paid, allocating, delegated) before creation answers 1101 (MAX_IN_FLIGHT_ORDERS).
	MaxInFlight int
	// MaxOrderEnergy is the account limit max_order_energy: the largest energy order
	// (MAX_ORDER_ENERGY); GET /v1/account shows it.
	MaxOrderEnergy int64
	// ReceiverMaxEnergy is the most energy one receiver may hold from this service's live
	// orders, all accounts together (RECEIVER_MAX_ENERGY); above it 5005. 0 = no ceiling.
	ReceiverMaxEnergy int64
	// ShortRental, when set, is how long an order of the 5m tier rents (DEV_SHORT_RENTAL,
	// the dev stack's only: CheckDeployed refuses it): the chaos soak sets it so that
	// rentals end while it injects faults within a two-minute run. Zero is the tier's own
	// 300 s.
	ShortRental time.Duration
	// GroupCommitters is how many group-commit transactions order creation runs at once
	// (ORDER_GROUP_COMMITTERS, docs/orders.md "Group commit"); 0 stores every order in a
	// transaction of its own.
	GroupCommitters int
	// AllowProviderSpill lets an order be filled beyond the own pools, from market providers
	// and the deep reserve (ALLOW_PROVIDER_SPILL); off, an order own stock cannot fill is 5007.
	AllowProviderSpill bool
	// BacklogMaxAge is how long the oldest accepted, undelivered order may wait before
	// order and batch creation refuse new work with 5050 (ORDER_BACKLOG_MAX_AGE, default
	// 60s; docs/orders.md "Backpressure").
	BacklogMaxAge time.Duration
	// The treasury (Ledger.Treasury, TREASURY_ADDRESS) is refused as a receiver (3003) too.
}

// Processor tunes the order processor.
type Processor struct {
	// LandGrace is how long after a delegation's expiration the processor waits for its
	// chain fact before asking the node (ORDER_LAND_GRACE).
	LandGrace time.Duration
	// SessionTimeout is the processors' Kafka consumer-group session timeout
	// (KAFKA_SESSION_TIMEOUT): how soon a dead replica's partitions move to the others.
	// Brokers refuse values below their group.min.session.timeout.ms (6 s by default).
	SessionTimeout time.Duration
	// DelegationLock is the pools' lock policy (DELEGATION_LOCK): "none" (default,
	// unlocked: a reclaim lands in the next block) or "tier" (locked for the tier when the
	// receiver holds no live lock from that pool). docs/order-processing.md, "Lock policy".
	DelegationLock string
}

// Pricing configures the pricer stage and its supply sources (docs/pricing.md).
type Pricing struct {
	Every time.Duration // PRICER_INTERVAL between snapshots
	// Providers maps a provider slug to the base URL of its offers API (PROVIDER_URLS,
	// "slug=url,..."); empty means no market supply.
	Providers map[string]string
	// DeepContract is the on-chain deep reserve rental contract (DEEP_RESERVE_CONTRACT);
	// zero disables the deep class. The dev stack points it at the simulator's contract.
	DeepContract tron.Address
	MaxStale     time.Duration // SUPPLY_MAX_STALE: how long a failing source's last answer is used
	// ProviderSimAddr is where the dev stack serves its simulated provider (PROVIDER_SIM_ADDR).
	ProviderSimAddr string
}

// Auth configures API keys, request signing and limits at the edge.
type Auth struct {
	// MasterKey encrypts API key secrets at rest (API_KEY_MASTER_KEY, 64 hex characters).
	// No default: the edge refuses to start without it; only the dev stack supplies a
	// dev-only key when it is unset.
	MasterKey []byte
	// PreviousMasterKey (API_KEY_MASTER_KEY_OLD) is set only while the master key is
	// rotated: secrets not yet re-encrypted still open under it (docs/operations.md).
	PreviousMasterKey []byte
	MaxActiveKeys     int            // MAX_ACTIVE_KEYS
	KeyCacheTTL       time.Duration  // KEY_CACHE_TTL: upper bound on how late a revocation bites
	TrustedProxies    []netip.Prefix // TRUSTED_PROXIES: CIDRs whose X-Forwarded-For is believed
	QuotaDaily        int64          // QUOTA_DAILY requests per account per UTC day, 0 = off
	QuotaMonthly      int64          // QUOTA_MONTHLY requests per account per UTC month, 0 = off
	RateLimitIP       int            // RATE_LIMIT_IP requests per second (and burst) per client IP
	// IPv6SourceBits is IPV6_SOURCE_PREFIX: the IPv6 network length counted as one source
	// by the per-IP budget and the challenge limits (default 64, 1..128).
	IPv6SourceBits int
}

// Signup configures challenges and dashboard sessions.
type Signup struct {
	ChallengesPerMinuteIP      int           // CHALLENGE_LIMIT_IP
	ChallengesPerMinuteAddress int           // CHALLENGE_LIMIT_ADDRESS, per source and address
	ChallengesPerMinuteCeiling int           // CHALLENGE_LIMIT_ADDRESS_TOTAL, per address from all sources
	SessionIdle                time.Duration // SESSION_IDLE, sliding
	SessionAbsolute            time.Duration // SESSION_ABSOLUTE
}

// Deposit configures deposit addresses.
type Deposit struct {
	// HDKey is the BIP32 root (xpub, xprv or hex seed) deposit addresses derive from
	// (DEPOSIT_HD_KEY). No default; only the dev stack supplies its dev seed when unset.
	HDKey string
	// XPub is the extended public key of m/44'/195'/0'/0 (DEPOSIT_XPUB): the edge derives
	// deposit addresses from it and refuses anything private. Defaults to the public key
	// of HDKey's chain where a stage holds HDKey (the dev stack, the admin tool).
	XPub          string
	Confirmations int    // DEPOSIT_CONFIRMATIONS before a deposit is credited
	USDTSpreadBps int    // USDT_SPREAD_BPS taken off the USDT rate
	USDTMin       string // USDT_DEPOSIT_MIN, smallest auto-credited USDT deposit (decimal)
	USDTMax       string // USDT_DEPOSIT_MAX, largest auto-credited USDT deposit (decimal)
	MinDepositSun int64  // MIN_DEPOSIT_SUN, smaller TRX transfers are held as residuals
}

// Ledger configures the ledger, deposit crediting, address rotation and sweeping
// (docs/ledger.md).
type Ledger struct {
	USDTRateSun       int64  // USDT_RATE_SUN, SUN per 1 USDT before the spread (fixed_env); 0 = no rate
	LowThresholdSun   int64  // BALANCE_LOW_THRESHOLD_SUN, default balance.low threshold
	OrderSun          int64  // BALANCE_LOW_ORDER_SUN, price of the reference order of estimated_orders_remaining
	RotationMinDays   int    // DEPOSIT_ROTATION_MIN_INTERVAL_DAYS
	RotationMax       int    // DEPOSIT_ROTATION_MAX_PER_WINDOW
	RotationWindow    int    // DEPOSIT_ROTATION_WINDOW_DAYS
	RetiredCreditDays int    // DEPOSIT_RETIRED_CREDIT_DAYS
	Treasury          string // TREASURY_ADDRESS, where sweeps send deposits ("" disables sweeping)
	// SweepPoolAddress is the own stake pool that lends energy for USDT sweeps
	// (SWEEP_POOL_ADDRESS); SweepSignerKey (SWEEP_SIGNER_KEY, hex) holds its delegate
	// permission and pays deposit-address activations from its own account. Secret.
	SweepPoolAddress string
	SweepSignerKey   string
	SweepEvery       time.Duration // SWEEP_INTERVAL
	SweepMinSun      int64         // SWEEP_MIN_TRX_SUN, smallest TRX balance worth sweeping
}

// Load reads the environment. It fails on a malformed value rather than guess.
func Load() (Config, error) {
	var errs []string
	env := NewEnv()
	known := env.known
	str, dur, integer, boolean := env.Str, env.Duration, env.Int, env.Bool

	// CHAIN_START_BLOCK may be -1, which integer() refuses.
	integerOrMinus1 := func(name string) int {
		if str(name, "") == "-1" {
			return -1
		}
		return integer(name, -1)
	}
	net, err := network.Parse(str("NETWORK", "mainnet"))
	if err != nil {
		errs = append(errs, "NETWORK: "+err.Error())
	}
	c := Config{
		Network:          net,
		Brand:            str("BRAND", "tronrent"),
		Host:             str("PUBLIC_HOST", "localhost"),
		ExplorerTxURL:    str("EXPLORER_TX_URL", defaultExplorer(net)),
		DatabaseURL:      str("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/rental?sslmode=disable"),
		RedisURL:         str("REDIS_URL", "redis://127.0.0.1:6379/0"),
		KafkaBrokers:     splitList(str("KAFKA_BROKERS", "127.0.0.1:9092")),
		TronNodeURL:      str("TRON_NODE_URL", "http://127.0.0.1:8090"),
		HTTPAddr:         str("HTTP_ADDR", "127.0.0.1:8080"),
		MetricsAddr:      str("METRICS_ADDR", "127.0.0.1:9100"),
		DataDir:          str("DATA_DIR", filepath.Join(".data")),
		Confirmations:    integer("CONFIRMATIONS", 19),
		ChainPollEvery:   dur("CHAIN_POLL_INTERVAL", time.Second),
		ChainStartBlock:  int64(integerOrMinus1("CHAIN_START_BLOCK")),
		SimAddr:          str("SIM_ADDR", "127.0.0.1:8090"),
		SimBlockInterval: dur("SIM_BLOCK_INTERVAL", 3*time.Second),
		OutboxSweepEvery: dur("OUTBOX_SWEEP_INTERVAL", time.Second),
		OutboxPollEvery:  dur("OUTBOX_POLL_INTERVAL", 10*time.Millisecond),
		ShutdownGrace:    dur("SHUTDOWN_GRACE", 10*time.Second),
	}
	if mk := str("API_KEY_MASTER_KEY", ""); mk != "" {
		b, err := hex.DecodeString(mk)
		if err != nil || len(b) != 32 {
			errs = append(errs, "API_KEY_MASTER_KEY: want 64 hex characters (32 bytes); generate with: openssl rand -hex 32")
		}
		c.Auth.MasterKey = b
	}
	if mk := str("API_KEY_MASTER_KEY_OLD", ""); mk != "" {
		b, err := hex.DecodeString(mk)
		if err != nil || len(b) != 32 {
			errs = append(errs, "API_KEY_MASTER_KEY_OLD: want 64 hex characters (32 bytes)")
		}
		c.Auth.PreviousMasterKey = b
	}
	c.Auth.MaxActiveKeys = integer("MAX_ACTIVE_KEYS", 10)
	c.Auth.KeyCacheTTL = dur("KEY_CACHE_TTL", 2*time.Second)
	if c.Auth.KeyCacheTTL > 10*time.Second {
		errs = append(errs, "KEY_CACHE_TTL: at most 10s, so a revoked key stops working within seconds")
	}
	for _, p := range splitList(str("TRUSTED_PROXIES", "")) {
		pp, err := netip.ParsePrefix(p)
		if err != nil {
			errs = append(errs, fmt.Sprintf("TRUSTED_PROXIES: %q is not a CIDR prefix", p))
			continue
		}
		c.Auth.TrustedProxies = append(c.Auth.TrustedProxies, pp.Masked())
	}
	c.Auth.QuotaDaily = int64(integer("QUOTA_DAILY", 0))
	c.Auth.QuotaMonthly = int64(integer("QUOTA_MONTHLY", 0))
	c.Auth.RateLimitIP = integer("RATE_LIMIT_IP", 100)
	if c.Auth.IPv6SourceBits = integer("IPV6_SOURCE_PREFIX", 64); c.Auth.IPv6SourceBits < 1 || c.Auth.IPv6SourceBits > 128 {
		errs = append(errs, fmt.Sprintf("IPV6_SOURCE_PREFIX=%d: an IPv6 prefix length, 1 to 128", c.Auth.IPv6SourceBits))
	}
	c.Signup = Signup{
		ChallengesPerMinuteIP:      integer("CHALLENGE_LIMIT_IP", 30),
		ChallengesPerMinuteAddress: integer("CHALLENGE_LIMIT_ADDRESS", 5),
		ChallengesPerMinuteCeiling: integer("CHALLENGE_LIMIT_ADDRESS_TOTAL", 60),
		SessionIdle:                dur("SESSION_IDLE", 2*time.Hour),
		SessionAbsolute:            dur("SESSION_ABSOLUTE", 24*time.Hour),
	}
	c.Deposit = Deposit{
		HDKey:         str("DEPOSIT_HD_KEY", ""),
		XPub:          str("DEPOSIT_XPUB", ""),
		Confirmations: integer("DEPOSIT_CONFIRMATIONS", 19),
		USDTSpreadBps: integer("USDT_SPREAD_BPS", 50),
		USDTMin:       str("USDT_DEPOSIT_MIN", "5"),
		USDTMax:       str("USDT_DEPOSIT_MAX", "2000"),
		MinDepositSun: int64(integer("MIN_DEPOSIT_SUN", 1_000_000)),
	}
	c.Ledger = Ledger{
		USDTRateSun:       int64(integer("USDT_RATE_SUN", 0)),
		LowThresholdSun:   int64(integer("BALANCE_LOW_THRESHOLD_SUN", 10_000_000)),
		OrderSun:          int64(integer("BALANCE_LOW_ORDER_SUN", 65_000*90)),
		RotationMinDays:   integer("DEPOSIT_ROTATION_MIN_INTERVAL_DAYS", 7),
		RotationMax:       integer("DEPOSIT_ROTATION_MAX_PER_WINDOW", 3),
		RotationWindow:    integer("DEPOSIT_ROTATION_WINDOW_DAYS", 90),
		RetiredCreditDays: integer("DEPOSIT_RETIRED_CREDIT_DAYS", 30),
		Treasury:          str("TREASURY_ADDRESS", ""),
		SweepPoolAddress:  str("SWEEP_POOL_ADDRESS", ""),
		SweepSignerKey:    str("SWEEP_SIGNER_KEY", ""),
		SweepEvery:        dur("SWEEP_INTERVAL", 10*time.Minute),
		SweepMinSun:       int64(integer("SWEEP_MIN_TRX_SUN", 1_000_000)),
	}
	if t := c.Ledger.Treasury; t != "" {
		if _, err := tron.ParseAddress(t); err != nil {
			errs = append(errs, fmt.Sprintf("TREASURY_ADDRESS: %q: %v", t, err))
		}
	}
	c.Webhook.AllowLoopback = boolean("WEBHOOK_ALLOW_LOOPBACK", false)
	c.Webhook.MaxDrives = integer("WEBHOOK_MAX_DRIVES", 256)
	c.Webhook.MaxDrivesPerAccount = integer("WEBHOOK_MAX_DRIVES_PER_ACCOUNT", 32)
	c.Webhook.TestsPerHour = integer("WEBHOOK_TESTS_PER_HOUR", 30)
	if c.Webhook.TestsPerHour < 1 {
		errs = append(errs, "WEBHOOK_TESTS_PER_HOUR: at least 1")
	}
	for _, v := range splitList(str("WEBHOOK_PORTS", "")) {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil || n == 0 {
			errs = append(errs, fmt.Sprintf("WEBHOOK_PORTS: %q is not a port number", v))
			continue
		}
		c.Webhook.Ports = append(c.Webhook.Ports, uint16(n))
	}
	for _, v := range splitList(str("WEBHOOK_RETRY_DELAYS", "")) {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Sprintf("WEBHOOK_RETRY_DELAYS: %q: want positive durations such as 15s,30s,3m", v))
			continue
		}
		c.Webhook.RetryDelays = append(c.Webhook.RetryDelays, d)
	}
	if len(c.Webhook.RetryDelays) > 9 {
		errs = append(errs, "WEBHOOK_RETRY_DELAYS: at most 9 delays (attempts 2 to 10)")
	}
	c.Processor = Processor{
		LandGrace:      dur("ORDER_LAND_GRACE", 90*time.Second),
		SessionTimeout: dur("KAFKA_SESSION_TIMEOUT", 10*time.Second),
		DelegationLock: str("DELEGATION_LOCK", "none"),
	}
	if l := c.Processor.DelegationLock; l != "none" && l != "tier" {
		errs = append(errs, fmt.Sprintf("DELEGATION_LOCK=%q: want none or tier", l))
	}
	c.Pricing = Pricing{
		Every:           dur("PRICER_INTERVAL", 3*time.Second),
		MaxStale:        dur("SUPPLY_MAX_STALE", 30*time.Second),
		Providers:       map[string]string{},
		ProviderSimAddr: str("PROVIDER_SIM_ADDR", "127.0.0.1:8091"),
	}
	known["PROVIDER_URLS"] = true
	provs, set := os.LookupEnv("PROVIDER_URLS")
	if !set {
		provs = "simmarket=http://" + c.Pricing.ProviderSimAddr
	}
	for _, p := range splitList(provs) {
		slug, u, ok := strings.Cut(p, "=")
		if !ok || slug == "" || u == "" {
			errs = append(errs, fmt.Sprintf("PROVIDER_URLS: %q: want slug=url", p))
			continue
		}
		c.Pricing.Providers[slug] = u
	}
	if deep := str("DEEP_RESERVE_CONTRACT", ""); deep != "" && deep != "off" {
		a, err := tron.ParseAddress(deep)
		if err != nil {
			errs = append(errs, fmt.Sprintf("DEEP_RESERVE_CONTRACT: %q: %v", deep, err))
		}
		c.Pricing.DeepContract = a
	}
	if usdt := str("USDT_CONTRACT", string(net.USDTContractOrEmpty())); usdt != "" {
		a, err := tron.ParseAddress(usdt)
		if err != nil {
			errs = append(errs, fmt.Sprintf("USDT_CONTRACT: %q: %v", usdt, err))
		}
		c.USDTContract = a
	}
	if c.MetricsAddr == "off" {
		c.MetricsAddr = ""
	}
	for _, a := range splitList(str("POOL_ADDRESSES", "")) {
		addr, err := tron.ParseAddress(a)
		if err != nil {
			errs = append(errs, fmt.Sprintf("POOL_ADDRESSES: %q: %v", a, err))
			continue
		}
		c.PoolAddresses = append(c.PoolAddresses, addr)
	}
	if str("POOL_KEYS", "") != "" {
		errs = append(errs, "POOL_KEYS is not read any more: set POOL_ADDRESSES and SIGNER_KEYS, keys holding only a delegate permission of the pools (docs/custody.md), and keep the pools' owner keys out of every stage")
	}
	for i, k := range splitList(str("SIGNER_KEYS", "")) {
		key, err := tron.ParsePrivateKey(k)
		if err != nil {
			errs = append(errs, fmt.Sprintf("SIGNER_KEYS: key %d is not a hex private key", i+1)) // never echo a key
			continue
		}
		c.SignerKeys = append(c.SignerKeys, key)
	}
	c.Payments = loadPayments(env)
	c.Subscriptions = Subscriptions{
		Available:   boolean("SUBSCRIPTIONS_AVAILABLE", true),
		CheckEvery:  dur("SUBSCRIPTION_CHECK_INTERVAL", 10*time.Second),
		Grace:       dur("SUBSCRIPTION_BILLING_GRACE", 24*time.Hour),
		RenewalLead: dur("SUBSCRIPTION_RENEWAL_LEAD", time.Minute),
	}
	c.Orders = Orders{
		MaxInFlight:        integer("MAX_IN_FLIGHT_ORDERS", 100),
		MaxOrderEnergy:     int64(integer("MAX_ORDER_ENERGY", 10_000_000)),
		ReceiverMaxEnergy:  int64(integer("RECEIVER_MAX_ENERGY", 50_000_000)),
		AllowProviderSpill: boolean("ALLOW_PROVIDER_SPILL", true),
		GroupCommitters:    integer("ORDER_GROUP_COMMITTERS", 2),
		BacklogMaxAge:      dur("ORDER_BACKLOG_MAX_AGE", 60*time.Second),
		ShortRental:        dur("DEV_SHORT_RENTAL", 0),
	}
	if r := c.Orders.ShortRental; r != 0 && (r < 10*time.Second || r > 5*time.Minute) {
		errs = append(errs, fmt.Sprintf("DEV_SHORT_RENTAL=%s: want 10s to 5m", r))
	}
	c.Batches = Batches{
		MaxReceivers:   integer("MAX_BATCH_RECEIVERS", 100),
		MaxTotalEnergy: int64(integer("BATCH_MAX_ENERGY", 100_000_000)),
		MaxOpen:        integer("MAX_OPEN_BATCHES", 20),
		Workers:        integer("BATCH_WORKERS", 4),
		PlaceEvery:     dur("BATCH_PLACE_INTERVAL", 0),
	}
	if c.Batches.MaxReceivers < 1 || c.Batches.MaxReceivers > 100 {
		errs = append(errs, fmt.Sprintf("MAX_BATCH_RECEIVERS=%d: want 1 to 100 (the spec's batch size)", c.Batches.MaxReceivers))
	}
	if c.Batches.MaxTotalEnergy <= 0 || c.Batches.MaxOpen <= 0 || c.Batches.Workers <= 0 {
		errs = append(errs, "BATCH_MAX_ENERGY, MAX_OPEN_BATCHES and BATCH_WORKERS must be positive")
	}
	if c.Orders.MaxInFlight == 0 || c.Orders.MaxOrderEnergy == 0 {
		errs = append(errs, "MAX_IN_FLIGHT_ORDERS and MAX_ORDER_ENERGY must be positive")
	}
	errs = append(errs, loadMarket(&c, str, dur)...)
	errs = append(errs, loadUSDTRate(&c, env)...)
	c.LogFormat = str("LOG_FORMAT", "")
	if f := c.LogFormat; f != "" && f != "json" && f != "text" {
		errs = append(errs, fmt.Sprintf("LOG_FORMAT=%q: want json or text", f))
	}
	c.LogLevel = str("LOG_LEVEL", "info")
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Sprintf("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	c.Kafka = Kafka{
		TLS:           boolean("KAFKA_TLS", false),
		CAFile:        str("KAFKA_TLS_CA_FILE", ""),
		CertFile:      str("KAFKA_TLS_CERT_FILE", ""),
		KeyFile:       str("KAFKA_TLS_KEY_FILE", ""),
		SASLMechanism: strings.ToUpper(str("KAFKA_SASL_MECHANISM", "")),
		SASLUsername:  str("KAFKA_SASL_USERNAME", ""),
		SASLPassword:  str("KAFKA_SASL_PASSWORD", ""),
	}
	switch c.Kafka.SASLMechanism {
	case "", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		errs = append(errs, fmt.Sprintf("KAFKA_SASL_MECHANISM=%q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", c.Kafka.SASLMechanism))
	}
	if c.Kafka.SASLMechanism != "" && (c.Kafka.SASLUsername == "" || c.Kafka.SASLPassword == "") {
		errs = append(errs, "KAFKA_SASL_MECHANISM is set: KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD are required")
	}
	c.Unknown = unknownVars(os.Environ(), known)
	errs = append(env.errs, errs...)
	if len(errs) > 0 {
		return c, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// defaultExplorer is tronscan's transaction page for the network.
func defaultExplorer(n network.Network) string {
	if n == network.Nile {
		return "https://nile.tronscan.org/#/transaction/{tx}"
	}
	return "https://tronscan.org/#/transaction/{tx}"
}

// readElsewhere are variables of the same prefixes that other programs read (the node
// simulator's, the standard proxy variables); they are not reported as unknown.
var readElsewhere = map[string]bool{
	"SIM_DATA_FILE": true, "SIM_FAUCET_KEY": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true,
}

// unknownVars returns, sorted, the names in environ (NAME=value pairs) that begin with the
// first word and underscore of a known name (KAFKA_, WEBHOOK_, ...) but are not known.
func unknownVars(environ []string, known map[string]bool) []string {
	prefixes := map[string]bool{}
	for name := range known {
		if i := strings.IndexByte(name, '_'); i > 0 {
			prefixes[name[:i+1]] = true
		}
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if known[name] || readElsewhere[name] {
			continue
		}
		if i := strings.IndexByte(name, '_'); i > 0 && prefixes[name[:i+1]] {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// CheckDeployed refuses what only a development machine may run with: on mainnet the
// public host must be the service's real domain, since it is bound into every signed
// challenge (a signature for "localhost" proves nothing to a customer). DEV_SHORT_RENTAL
// (a 5m tier that rents for less than the spec's 5 minutes) is refused on every network.
// The edge binary, the only stage that uses the host and the one that accepts orders,
// calls it; the dev stack does not.
func (c Config) CheckDeployed() error {
	if c.Orders.ShortRental != 0 {
		return fmt.Errorf("configuration: DEV_SHORT_RENTAL=%s is for the dev stack and its soak only; unset it", c.Orders.ShortRental)
	}
	if c.Network == network.Mainnet {
		h := strings.ToLower(c.Host)
		if h == "localhost" || strings.HasPrefix(h, "localhost:") || strings.HasPrefix(h, "127.") || h == "::1" {
			return fmt.Errorf("configuration: PUBLIC_HOST=%q on mainnet: set it to the API's public domain name", c.Host)
		}
	}
	return nil
}
