package pricing

import (
	"errors"
	"math/bits"
)

// Fixed-point helpers. Every price computation goes through these so that the rounding rule
// of each step is named at the call site and overflow is detected instead of wrapping.
// Operands are non-negative; products are formed in 128 bits.

// BPSOne is the factor 1.00 in basis points.
const BPSOne = 10_000

var errOverflow = errors.New("pricing: fixed-point overflow")

type rounding int

const (
	roundDown   rounding = iota // floor
	roundUp                     // ceiling
	roundHalfUp                 // nearest, ties away from zero
)

// mulDiv returns a*b/d rounded as asked. a, b >= 0 and d > 0.
func mulDiv(a, b, d int64, mode rounding) (int64, error) {
	if a < 0 || b < 0 || d <= 0 {
		return 0, errors.New("pricing: mulDiv wants non-negative operands and a positive divisor")
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return 0, errOverflow
	}
	q, r := bits.Div64(hi, lo, uint64(d))
	switch mode {
	case roundUp:
		if r != 0 {
			q++
		}
	case roundHalfUp:
		// r >= d - r  <=>  2r >= d, written so that 2r cannot overflow.
		if r >= uint64(d)-r {
			q++
		}
	}
	if q > 1<<63-1 {
		return 0, errOverflow
	}
	return int64(q), nil
}

// ApplyBPS scales price by factorBPS/10,000, rounded half up to the hundredth of a SUN. It is
// how a day-part factor turns a base price into the price in force.
func ApplyBPS(price Centisun, factorBPS int64) (Centisun, error) {
	v, err := mulDiv(int64(price), factorBPS, BPSOne, roundHalfUp)
	return Centisun(v), err
}

// MarkupBPS scales a cost by (10,000 + markupBPS)/10,000, rounded up to the hundredth of a
// SUN: resold supply is never priced a fraction below cost plus margin.
func MarkupBPS(cost Centisun, markupBPS int64) (Centisun, error) {
	v, err := mulDiv(int64(cost), BPSOne+markupBPS, BPSOne, roundUp)
	return Centisun(v), err
}

// CeilSun is the price rounded up to whole SUN (the spec's integer price_sun_per_unit).
func CeilSun(c Centisun) int64 {
	return (int64(c) + CentisunPerSun - 1) / CentisunPerSun
}

// CentisunPerSun is the number of Centisun in a SUN.
const CentisunPerSun = 100

// SunToCentisun converts whole SUN to Centisun.
func SunToCentisun(sun int64) Centisun { return Centisun(sun * CentisunPerSun) }

// addMul returns acc + price*amount, failing on overflow.
func addMul(acc int64, price Centisun, amount int64) (int64, error) {
	p, err := mulDiv(int64(price), amount, 1, roundDown)
	if err != nil {
		return 0, err
	}
	s, carry := bits.Add64(uint64(acc), uint64(p), 0)
	if carry != 0 || s > 1<<63-1 {
		return 0, errOverflow
	}
	return int64(s), nil
}
