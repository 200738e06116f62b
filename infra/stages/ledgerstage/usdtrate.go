package ledgerstage

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/config"
	"rental/infra/deposits"
	"rental/infra/tron"
	"rental/schemas/ledger"
)

// CreditRateTTL is how long crediting reuses a USDT rate read: one block, so a deposit is
// credited at the rate of the solidified block at credit time (the spec's "rate read at
// credit time") without one node read per deposit of a busy block.
const CreditRateTTL = 3 * time.Second

// USDTRate is the configured USDT rate source, uncached (docs/ledger.md "USDT rate
// sources"): USDT_RATE_SOURCE fixed_env is USDT_RATE_SUN (no rate when unset), sunswap_v3 the
// pool USDT_RATE_POOL read through TRON_NODE_URL. reg receives the rate's metrics (nil:
// none).
func USDTRate(cfg config.Config, reg prometheus.Registerer, log *slog.Logger) (deposits.RateSource, error) {
	r := cfg.USDTRate
	if r.Source != config.RateSourceSunswapV3 {
		return deposits.FixedRate{SunPerUSDT: cfg.Ledger.USDTRateSun}, nil
	}
	var m *deposits.RateMetrics
	if reg != nil {
		m = deposits.NewRateMetrics(reg)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return deposits.NewPoolRate(deposits.PoolRateOptions{
		Node:   tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(5*time.Second)),
		Source: deposits.SourceSunswapV3, Pool: r.Pool, USDT: cfg.USDTContract, WTRX: r.WTRX, Window: r.Window,
		Guards:  ledger.PoolGuards{MinLiquidity: r.MinLiquidity, MaxGapBps: int64(r.MaxGapBps)},
		Metrics: m, Logger: log.With("component", "usdt-rate"),
	})
}

// CachedUSDTRate is USDTRate with each read reused for ttl.
func CachedUSDTRate(cfg config.Config, ttl time.Duration, reg prometheus.Registerer, log *slog.Logger) (deposits.RateSource, error) {
	src, err := USDTRate(cfg, reg, log)
	if err != nil {
		return nil, err
	}
	return &deposits.CachedRate{Source: src, TTL: ttl}, nil
}
