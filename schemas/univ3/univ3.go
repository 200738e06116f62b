// Package univ3 is the price arithmetic of a Uniswap-v3-style pool (SunSwap v3 on TRON),
// without I/O: ticks, Q64.96 square-root prices and the time-weighted mean tick of the
// pool's oracle. A pool's price is always token1 per token0 in the tokens' smallest units;
// tick t stands for the price 1.0001^t, and a price's tick is the largest tick whose price
// does not exceed it (floor(log_1.0001(price))).
//
// Prices are big.Float values of Prec bits; at that precision 1.0001^t for every tick of
// the pool's range is far more exact than the pool's own fixed-point table, so a tick read
// back from a price computed here is the tick it came from.
package univ3

import (
	"errors"
	"math/big"
)

// MinTick and MaxTick bound a pool's ticks (prices 2^-128 to 2^128).
const (
	MinTick = -887272
	MaxTick = 887272
)

// Prec is the precision (bits) of the prices computed here.
const Prec = 256

var (
	tickBase = mustFloat("1.0001")
	q96      = new(big.Float).SetPrec(Prec).SetMantExp(big.NewFloat(1), 96) // 2^96
)

func mustFloat(s string) *big.Float {
	f, _, err := big.ParseFloat(s, 10, Prec, big.ToNearestEven)
	if err != nil {
		panic(err)
	}
	return f
}

// PriceAtTick is 1.0001^tick.
func PriceAtTick(tick int) *big.Float {
	n := tick
	if n < 0 {
		n = -n
	}
	result := new(big.Float).SetPrec(Prec).SetInt64(1)
	base := new(big.Float).SetPrec(Prec).Set(tickBase)
	for n > 0 {
		if n&1 == 1 {
			result.Mul(result, base)
		}
		base.Mul(base, base)
		n >>= 1
	}
	if tick < 0 {
		result.Quo(new(big.Float).SetPrec(Prec).SetInt64(1), result)
	}
	return result
}

// ErrPriceRange is returned for a price outside the ticks' range (or not positive).
var ErrPriceRange = errors.New("univ3: price outside the pool's tick range")

// TickAtPrice is the largest tick whose price does not exceed price.
func TickAtPrice(price *big.Float) (int, error) {
	if price.Sign() <= 0 || price.Cmp(PriceAtTick(MinTick)) < 0 || price.Cmp(PriceAtTick(MaxTick)) > 0 {
		return 0, ErrPriceRange
	}
	lo, hi := MinTick, MaxTick // invariant: PriceAtTick(lo) <= price < PriceAtTick(hi+1)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if PriceAtTick(mid).Cmp(price) <= 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}

// SqrtPriceX96 is the pool's slot0 form of price: floor(sqrt(price) * 2^96).
func SqrtPriceX96(price *big.Float) *big.Int {
	s := new(big.Float).SetPrec(Prec).Sqrt(price)
	s.Mul(s, q96)
	v, _ := s.Int(nil) // truncates toward zero: the floor of a positive value
	return v
}

// PriceFromSqrtX96 is the price a slot0 sqrtPriceX96 stands for: (sqrtPriceX96 / 2^96)^2.
func PriceFromSqrtX96(sqrtPriceX96 *big.Int) *big.Float {
	s := new(big.Float).SetPrec(Prec).SetInt(sqrtPriceX96)
	s.Quo(s, q96)
	return s.Mul(s, s)
}

// MeanTick is the time-weighted mean tick between two readings of the oracle's tick
// accumulator taken seconds apart (then earlier, now later), rounded toward negative
// infinity as the v3 periphery's OracleLibrary.consult does.
func MeanTick(cumThen, cumNow int64, seconds uint32) (int, error) {
	if seconds == 0 {
		return 0, errors.New("univ3: a mean over zero seconds")
	}
	d, w := cumNow-cumThen, int64(seconds)
	m := d / w
	if d%w != 0 && d < 0 {
		m--
	}
	if m < MinTick || m > MaxTick {
		return 0, ErrPriceRange
	}
	return int(m), nil
}
