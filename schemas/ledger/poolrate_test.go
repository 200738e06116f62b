package ledger

import (
	"math/big"
	"testing"
)

func bigInt(t *testing.T, s string) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		t.Fatal(s)
	}
	return v
}

// The expected SUN figures were computed independently with Python's decimal module (120
// digits): spot = floor((sqrtPriceX96 / 2**96)**2 * scale), mean = floor(1.0001**tick *
// scale) when USDT is token0, and floor(scale / price) when USDT is token1, where scale is
// 10**usdt_decimals * 10**6 / 10**wtrx_decimals.
func TestJudgePoolReadsEitherTokenOrderAndAnyDecimals(t *testing.T) {
	guards := PoolGuards{MinLiquidity: big.NewInt(1_000_000), MaxGapBps: 200}
	for _, c := range []struct {
		name          string
		r             PoolReading
		spot, mean    int64
		gapBps        int64
		rate          int64
		wantNoRateFor string
	}{
		{"USDT is token0, 3.45 TRX per USDT held for the window",
			PoolReading{USDTIsToken0: true, USDTDecimals: 6, WTRXDecimals: 6, SqrtPriceX96: bigInt(t, "147159780466960634275143791148"),
				Liquidity: big.NewInt(5_000_000), TickCumulativeThen: 0, TickCumulativeNow: 12384 * 1800, WindowSeconds: 1800},
			3449999, 3449875, 1, 3449875, ""},
		{"WTRX is token0: the price is USDT per WTRX and is inverted",
			PoolReading{USDTIsToken0: false, USDTDecimals: 6, WTRXDecimals: 6, SqrtPriceX96: bigInt(t, "42655008831003081225579660378"),
				Liquidity: big.NewInt(5_000_000), TickCumulativeThen: 500, TickCumulativeNow: 500 - 12385*1800, WindowSeconds: 1800},
			3450000, 3450220, 1, 3450000, ""},
		{"an 18-decimal wrapped TRX",
			PoolReading{USDTIsToken0: true, USDTDecimals: 6, WTRXDecimals: 18, SqrtPriceX96: bigInt(t, "147159780466960634275143791148036014"),
				Liquidity: big.NewInt(5_000_000), TickCumulativeNow: 288708 * 60, WindowSeconds: 60},
			3449999, 3449866, 1, 3449866, ""},
		{"after one block at ten times the price in a 60 s window the spot is paid, not the mean, and the gap is too wide",
			PoolReading{USDTIsToken0: true, USDTDecimals: 6, WTRXDecimals: 6, SqrtPriceX96: bigInt(t, "147159780466960634275143791148"),
				Liquidity: big.NewInt(5_000_000), TickCumulativeNow: 12384*57 + 35411*3, WindowSeconds: 60},
			3449999, 3870688, 1087, 3449999, NoRateGap},
		{"liquidity below the floor",
			PoolReading{USDTIsToken0: true, USDTDecimals: 6, WTRXDecimals: 6, SqrtPriceX96: bigInt(t, "147159780466960634275143791148"),
				Liquidity: big.NewInt(999_999), TickCumulativeNow: 12384 * 1800, WindowSeconds: 1800},
			3449999, 3449875, 1, 3449875, NoRateLiquidity},
	} {
		got, reason := JudgePool(c.r, guards)
		if got.SpotSun != c.spot || got.MeanSun != c.mean || got.GapBps != c.gapBps || got.RateSun != c.rate || reason != c.wantNoRateFor {
			t.Errorf("%s: got %+v, reason %q; want spot %d mean %d gap %d rate %d, reason %q",
				c.name, got, reason, c.spot, c.mean, c.gapBps, c.rate, c.wantNoRateFor)
		}
	}
}

func TestJudgePoolRefusesUnusableReadings(t *testing.T) {
	ok := PoolReading{USDTIsToken0: true, USDTDecimals: 6, WTRXDecimals: 6, SqrtPriceX96: bigInt(t, "147159780466960634275143791148"),
		Liquidity: big.NewInt(1), TickCumulativeNow: 12384 * 60, WindowSeconds: 60}
	if _, reason := JudgePool(ok, PoolGuards{MaxGapBps: 10}); reason != "" {
		t.Fatalf("the good reading refused: %s", reason)
	}
	for name, mutate := range map[string]func(r *PoolReading){
		"pool not initialised (zero price)": func(r *PoolReading) { r.SqrtPriceX96 = big.NewInt(0) },
		"no price":                          func(r *PoolReading) { r.SqrtPriceX96 = nil },
		"no window":                         func(r *PoolReading) { r.WindowSeconds = 0 },
		"absurd decimals":                   func(r *PoolReading) { r.WTRXDecimals = 77 },
		"a price worth less than one SUN":   func(r *PoolReading) { r.SqrtPriceX96 = big.NewInt(1) },
	} {
		r := ok
		mutate(&r)
		if _, reason := JudgePool(r, PoolGuards{MaxGapBps: 10}); reason != NoRateUnreadable {
			t.Errorf("%s: reason %q, want %q", name, reason, NoRateUnreadable)
		}
	}
}
