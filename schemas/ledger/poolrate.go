package ledger

import (
	"math/big"

	"rental/schemas/univ3"
)

// The USDT rate from a swap pool (source <swap>_v3, docs/ledger.md "USDT rate sources"): a
// Uniswap-v3-style USDT/WTRX pool read at one block. The rate is the pool's time-weighted
// mean price over a window, guarded against a price someone moved for the block read.

// Reasons for no pool rate; each leaves rate_now null and USDT deposits held_no_rate.
const (
	NoRateUnreadable = "unreadable"         // the pool or the node did not answer usably
	NoRateWindow     = "window_not_covered" // the pool's observations do not reach back over the window
	NoRateLiquidity  = "low_liquidity"      // in-range liquidity below the floor
	NoRateGap        = "spot_gap"           // spot and mean differ by more than the bound
)

// NoRateReasons lists every reason, for metrics.
var NoRateReasons = []string{NoRateUnreadable, NoRateWindow, NoRateLiquidity, NoRateGap}

// PoolReading is what the pool answered at one block.
type PoolReading struct {
	USDTIsToken0 bool // token0() is the USDT contract (token1() is then WTRX)
	USDTDecimals int  // decimals() of each token, as the token contracts answer
	WTRXDecimals int
	SqrtPriceX96 *big.Int // slot0().sqrtPriceX96: the spot price
	Liquidity    *big.Int // liquidity(): in range at the spot price
	// TickCumulativeThen and TickCumulativeNow are observe([WindowSeconds, 0]).
	TickCumulativeThen, TickCumulativeNow int64
	WindowSeconds                         uint32
}

// PoolGuards bound what a reading may show before it counts as a rate.
type PoolGuards struct {
	MinLiquidity *big.Int // liquidity below it gives no rate
	MaxGapBps    int64    // spot further than this from the mean (bps of the mean) gives no rate
}

// PoolRate is a judged reading: every figure in SUN per 1 USDT.
type PoolRate struct {
	SpotSun int64 // at slot0's price
	MeanSun int64 // at the time-weighted mean tick
	GapBps  int64 // |spot - mean| / mean, rounded up
	// RateSun is the rate credited before the spread: the lower of spot and mean, so a
	// price pushed up for the block read is never paid, and a mean still carrying an old
	// spike is never paid either.
	RateSun int64
}

// JudgePool turns a reading into a rate, or into the reason there is none (the PoolRate
// then carries whatever figures could be computed, for metrics).
func JudgePool(r PoolReading, g PoolGuards) (PoolRate, string) {
	var out PoolRate
	if r.SqrtPriceX96 == nil || r.SqrtPriceX96.Sign() <= 0 || r.Liquidity == nil || r.Liquidity.Sign() < 0 ||
		r.USDTDecimals < 0 || r.USDTDecimals > 36 || r.WTRXDecimals < 0 || r.WTRXDecimals > 36 {
		return out, NoRateUnreadable
	}
	mean, err := univ3.MeanTick(r.TickCumulativeThen, r.TickCumulativeNow, r.WindowSeconds)
	if err != nil {
		return out, NoRateUnreadable
	}
	spot, ok1 := sunPerUSDT(univ3.PriceFromSqrtX96(r.SqrtPriceX96), r)
	avg, ok2 := sunPerUSDT(univ3.PriceAtTick(mean), r)
	if !ok1 || !ok2 {
		return out, NoRateUnreadable
	}
	out.SpotSun, out.MeanSun, out.RateSun = spot, avg, min(spot, avg)
	diff := new(big.Int).Abs(big.NewInt(spot - avg))
	diff.Mul(diff, big.NewInt(10_000))
	gap, rem := new(big.Int).QuoRem(diff, big.NewInt(avg), new(big.Int))
	if rem.Sign() != 0 {
		gap.Add(gap, big.NewInt(1))
	}
	out.GapBps = gap.Int64()
	if g.MinLiquidity != nil && r.Liquidity.Cmp(g.MinLiquidity) < 0 {
		return out, NoRateLiquidity
	}
	if out.GapBps > g.MaxGapBps {
		return out, NoRateGap
	}
	return out, ""
}

// sunPerUSDT converts a pool price (token1 per token0 in base units) to SUN per 1 USDT,
// rounded down; ok is false when it is not a positive int64. One WTRX is one TRX, 10^6 SUN.
func sunPerUSDT(price *big.Float, r PoolReading) (int64, bool) {
	pow := func(n int) *big.Float {
		return new(big.Float).SetPrec(univ3.Prec).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil))
	}
	// USDT base units per 1 USDT, times SUN per WTRX base unit.
	scale := new(big.Float).SetPrec(univ3.Prec).Mul(pow(r.USDTDecimals), pow(6))
	scale.Quo(scale, pow(r.WTRXDecimals))
	v := new(big.Float).SetPrec(univ3.Prec)
	if r.USDTIsToken0 { // price is WTRX units per USDT unit
		v.Mul(price, scale)
	} else { // price is USDT units per WTRX unit
		v.Quo(scale, price)
	}
	i, _ := v.Int(nil)
	if !i.IsInt64() || i.Sign() <= 0 {
		return 0, false
	}
	return i.Int64(), true
}
