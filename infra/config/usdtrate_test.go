package config

import (
	"strings"
	"testing"
	"time"
)

func TestUSDTRateSourceConfiguration(t *testing.T) {
	c, err := Load()
	if err != nil || c.USDTRate.Source != RateSourceFixedEnv || c.USDTRate.Window != 30*time.Minute ||
		c.USDTRate.MaxGapBps != 200 || c.USDTRate.CacheTTL != time.Minute || c.USDTRate.WTRX.String() != MainnetWTRX {
		t.Fatalf("defaults: %+v, %v", c.USDTRate, err)
	}
	t.Setenv("USDT_RATE_SOURCE", "sunswap_v3")
	_, err = Load()
	for _, want := range []string{"USDT_RATE_POOL", "USDT_RATE_MIN_LIQUIDITY"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("sunswap_v3 without %s: %v", want, err)
		}
	}
	t.Setenv("USDT_RATE_POOL", MainnetWTRX) // any valid address
	t.Setenv("USDT_RATE_MIN_LIQUIDITY", "1000000000000")
	t.Setenv("USDT_RATE_WINDOW", "45m")
	if c, err = Load(); err != nil || c.USDTRate.MinLiquidity.String() != "1000000000000" || c.USDTRate.Window != 45*time.Minute {
		t.Fatalf("a complete sunswap_v3 configuration: %+v, %v", c.USDTRate, err)
	}
	for name, bad := range map[string][2]string{
		"liquidity not a number":         {"USDT_RATE_MIN_LIQUIDITY", "lots"},
		"liquidity above uint128":        {"USDT_RATE_MIN_LIQUIDITY", "340282366920938463463374607431768211456"},
		"a window under a minute":        {"USDT_RATE_WINDOW", "30s"},
		"a gap of 100 %":                 {"USDT_RATE_MAX_GAP_BPS", "10000"},
		"a fixed rate beside the pool":   {"USDT_RATE_SUN", "3400000"},
		"a pool that is not an address":  {"USDT_RATE_POOL", "T123"},
		"an unknown source":              {"USDT_RATE_SOURCE", "oracle"},
		"no WTRX on nile without naming": {"NETWORK", "nile"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(bad[0], bad[1])
			if _, err := Load(); err == nil || !strings.Contains(err.Error(), "USDT_RATE_") {
				t.Errorf("%s=%s accepted: %v", bad[0], bad[1], err)
			}
		})
	}
}
