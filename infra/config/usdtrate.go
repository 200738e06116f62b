package config

import (
	"fmt"
	"math/big"
	"time"

	"rental/infra/tron"
	"rental/schemas/network"
)

// USDTRate selects and configures the source of the USDT deposit rate (docs/ledger.md
// "USDT rate sources").
type USDTRate struct {
	// Source is USDT_RATE_SOURCE: fixed_env (USDT_RATE_SUN, the default) or sunswap_v3.
	Source string
	// Pool is the SunSwap v3 USDT/WTRX pool (USDT_RATE_POOL), required for sunswap_v3.
	Pool tron.Address
	// WTRX is the wrapped TRX token the pool pairs USDT with (USDT_RATE_WTRX; mainnet's
	// WTRX by default, no default on nile).
	WTRX tron.Address
	// Window is the time-weighted mean's window (USDT_RATE_WINDOW, default 30m).
	Window time.Duration
	// MinLiquidity is the floor of the pool's in-range liquidity() (USDT_RATE_MIN_LIQUIDITY,
	// a decimal uint128; required for sunswap_v3).
	MinLiquidity *big.Int
	// MaxGapBps bounds spot against mean, basis points of the mean (USDT_RATE_MAX_GAP_BPS,
	// default 200).
	MaxGapBps int
	// CacheTTL is how long rate_now reuses a read (USDT_RATE_CACHE_TTL, default 60s, the
	// spec's cache time). Crediting reads at credit time, reusing a read for at most one
	// block (CreditCacheTTL).
	CacheTTL time.Duration
}

// Rate sources.
const (
	RateSourceFixedEnv  = "fixed_env"
	RateSourceSunswapV3 = "sunswap_v3"
)

// MainnetWTRX is mainnet's wrapped TRX (6 decimals).
const MainnetWTRX = "TNUC9Qb1rRpS5CbWLmNMxXBjyFoydXjWFR"

func loadUSDTRate(c *Config, env *Env) []string {
	var errs []string
	r := USDTRate{
		Source:    env.Str("USDT_RATE_SOURCE", RateSourceFixedEnv),
		Window:    env.Duration("USDT_RATE_WINDOW", 30*time.Minute),
		MaxGapBps: env.Int("USDT_RATE_MAX_GAP_BPS", 200),
		CacheTTL:  env.Duration("USDT_RATE_CACHE_TTL", 60*time.Second),
	}
	wtrxDefault := ""
	if c.Network == network.Mainnet {
		wtrxDefault = MainnetWTRX
	}
	addr := func(name, def string) tron.Address {
		v := env.Str(name, def)
		if v == "" {
			return tron.Address{}
		}
		a, err := tron.ParseAddress(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %q: %v", name, v, err))
		}
		return a
	}
	r.Pool = addr("USDT_RATE_POOL", "")
	r.WTRX = addr("USDT_RATE_WTRX", wtrxDefault)
	if v := env.Str("USDT_RATE_MIN_LIQUIDITY", ""); v != "" {
		l, ok := new(big.Int).SetString(v, 10)
		if !ok || l.Sign() < 0 || l.BitLen() > 128 {
			errs = append(errs, fmt.Sprintf("USDT_RATE_MIN_LIQUIDITY=%q: want a decimal uint128 (the pool's liquidity() units)", v))
		}
		r.MinLiquidity = l
	}
	switch r.Source {
	case RateSourceFixedEnv:
	case RateSourceSunswapV3:
		if r.Pool.IsZero() {
			errs = append(errs, "USDT_RATE_SOURCE=sunswap_v3: USDT_RATE_POOL (the USDT/WTRX pool) is required")
		}
		if r.WTRX.IsZero() {
			errs = append(errs, "USDT_RATE_SOURCE=sunswap_v3: USDT_RATE_WTRX is required on this network")
		}
		if r.MinLiquidity == nil {
			errs = append(errs, "USDT_RATE_SOURCE=sunswap_v3: USDT_RATE_MIN_LIQUIDITY is required (docs/ledger.md: how to choose it)")
		}
		if r.Window < time.Minute || r.Window > 24*time.Hour {
			errs = append(errs, fmt.Sprintf("USDT_RATE_WINDOW=%s: want 1m to 24h", r.Window))
		}
		if r.MaxGapBps <= 0 || r.MaxGapBps >= 10_000 {
			errs = append(errs, fmt.Sprintf("USDT_RATE_MAX_GAP_BPS=%d: want 1 to 9999", r.MaxGapBps))
		}
		if c.Ledger.USDTRateSun != 0 {
			errs = append(errs, "USDT_RATE_SUN is the fixed_env rate: unset it with USDT_RATE_SOURCE=sunswap_v3")
		}
	default:
		errs = append(errs, fmt.Sprintf("USDT_RATE_SOURCE=%q: want fixed_env or sunswap_v3", r.Source))
	}
	c.USDTRate = r
	return errs
}
