package univ3

import (
	"math/big"
	"testing"
)

// The expected values below were computed independently with Python's decimal module at
// 120 significant digits:
//
//	from decimal import Decimal, getcontext, ROUND_FLOOR
//	getcontext().prec = 120
//	price = lambda t: Decimal("1.0001") ** t
//	tick  = floor(ln(p) / ln(1.0001)), then moved while price(t+1) <= p or price(t) > p
//	sqrtX96 = floor(sqrt(p) * 2**96)
//
// and one against Uniswap v3 itself: TickMath.MIN_SQRT_RATIO = 4295128739 is the square
// root price of MIN_TICK rounded up, 4295128738.13... exactly.

func parse(t *testing.T, s string) *big.Float {
	t.Helper()
	f, _, err := big.ParseFloat(s, 10, Prec, big.ToNearestEven)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// near reports whether got is within rel of want.
func near(got, want *big.Float, rel string) bool {
	d := new(big.Float).SetPrec(Prec).Sub(got, want)
	d.Abs(d)
	lim, _, _ := big.ParseFloat(rel, 10, Prec, big.ToNearestEven)
	return d.Cmp(new(big.Float).SetPrec(Prec).Mul(lim, want)) <= 0
}

func TestPriceAtTickMatchesIndependentValues(t *testing.T) {
	for _, c := range []struct {
		tick int
		want string
	}{
		{0, "1"},
		{1, "1.0001"},
		{-1, "9.9990000999900009999000099990000999900010e-1"},
		{12345, "3.4364476540332867772608622650465072042158e+0"},
		{23027, "9.9999977968106962391794353056471638291815e+0"},
		{-23027, "1.0000002203189789165238329085401396978711e-1"},
		{887272, "3.4025678683638809405080578505294654106675e+38"},
		{-887272, "2.9389568075855848388747548649688341088431e-39"},
	} {
		if got := PriceAtTick(c.tick); !near(got, parse(t, c.want), "1e-38") {
			t.Errorf("PriceAtTick(%d) = %s, want %s", c.tick, got.Text('e', 40), c.want)
		}
	}
}

func TestTickAtPriceIsTheFloorOfTheLog(t *testing.T) {
	for _, c := range []struct {
		price string
		want  int
	}{
		{"3.45", 12384},
		{"0.2898550724637681", -12385}, // 1/3.45: USDT per TRX when USDT is token1
		{"34.5", 35411},
		{"1", 0},
		{"3.45e-12", -263940}, // 3.45 TRX per USDT between an 18- and a 6-decimal token
	} {
		got, err := TickAtPrice(parse(t, c.price))
		if err != nil || got != c.want {
			t.Errorf("TickAtPrice(%s) = %d, %v; want %d", c.price, got, err, c.want)
		}
	}
	// Every tick's own price maps back to it, and a hair below it to the tick under it.
	for _, tick := range []int{MinTick + 1, -200000, -1, 0, 1, 12384, 200000, MaxTick} {
		p := PriceAtTick(tick)
		if got, err := TickAtPrice(p); err != nil || got != tick {
			t.Errorf("TickAtPrice(PriceAtTick(%d)) = %d, %v", tick, got, err)
		}
		below := new(big.Float).SetPrec(Prec).Mul(p, parse(t, "0.99999999"))
		if got, _ := TickAtPrice(below); got != tick-1 {
			t.Errorf("a price just below tick %d's gives tick %d", tick, got)
		}
	}
	for _, bad := range []string{"0", "-1", "1e-40", "1e39"} {
		if _, err := TickAtPrice(parse(t, bad)); err == nil {
			t.Errorf("TickAtPrice(%s) accepted", bad)
		}
	}
}

func TestSqrtPriceX96(t *testing.T) {
	for _, c := range []struct{ price, want string }{
		{"1", "79228162514264337593543950336"}, // 2^96
		{"3.45", "147159780466960634275143791148"},
		{"0.2898550724637681", "42655008831003081225579660378"},
	} {
		if got := SqrtPriceX96(parse(t, c.price)); got.String() != c.want {
			t.Errorf("SqrtPriceX96(%s) = %s, want %s", c.price, got, c.want)
		}
	}
	// Uniswap v3's TickMath.MIN_SQRT_RATIO is MIN_TICK's square root price rounded up.
	if got := SqrtPriceX96(PriceAtTick(MinTick)); got.String() != "4295128738" {
		t.Errorf("floor of the square root price of MIN_TICK = %s, want 4295128738 (MIN_SQRT_RATIO - 1)", got)
	}
	s, _ := new(big.Int).SetString("147058166658488329728815149632", 10)
	if got := PriceFromSqrtX96(s); !near(got, parse(t, "3.4452371958606660511233009840267042059276"), "1e-38") {
		t.Errorf("PriceFromSqrtX96 = %s", got.Text('e', 40))
	}
}

func TestMeanTickRoundsTowardNegativeInfinity(t *testing.T) {
	for _, c := range []struct {
		then, now int64
		secs      uint32
		want      int
	}{
		{0, 12384 * 1800, 1800, 12384},
		{1000, 1000 - 12385*60, 60, -12385},
		{0, 7, 2, 3},   // 3.5 -> 3
		{0, -7, 2, -4}, // -3.5 -> -4
		{0, -8, 2, -4}, // exact
		// 19 blocks (3 s each) at tick 12384 and one at 35411 (ten times the price) in 60 s.
		{0, 12384*57 + 35411*3, 60, 13535},
	} {
		got, err := MeanTick(c.then, c.now, c.secs)
		if err != nil || got != c.want {
			t.Errorf("MeanTick(%d, %d, %d) = %d, %v; want %d", c.then, c.now, c.secs, got, err, c.want)
		}
	}
	if _, err := MeanTick(0, 1, 0); err == nil {
		t.Error("a zero window accepted")
	}
	if _, err := MeanTick(0, int64(MaxTick+1)*10, 10); err == nil {
		t.Error("a mean tick out of range accepted")
	}
}
