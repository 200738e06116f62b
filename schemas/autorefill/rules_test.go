package autorefill

import (
	"slices"
	"testing"
	"time"
)

func TestDailyFeeRoundsUpToWholeTRX(t *testing.T) {
	for reserve, trx := range map[int64]int64{131_000: 6, 1_300_000: 60, 2_620_000: 120, 5_240_000: 240, 132_000: 7, 262_000: 12, 263_000: 13} {
		if got := DailyFeeSun(reserve); got != trx*SunPerTRX {
			t.Errorf("reserve %d: fee %d SUN, want %d TRX", reserve, got, trx)
		}
	}
	for _, p := range Presets {
		if vs := p.Rule.Validate(); len(vs) != 0 {
			t.Errorf("preset %s breaks the rule constants: %v", p.Slug, vs)
		}
	}
}

func TestRuleLimits(t *testing.T) {
	rules := func(r Rule) []string {
		var out []string
		for _, v := range r.Validate() {
			out = append(out, v.Field+":"+v.Rule)
		}
		slices.Sort(out)
		return out
	}
	cases := []struct {
		r    Rule
		want []string
	}{
		{Rule{131_000, 131_000, 131_000}, nil}, // the basic exception
		{Rule{131_000, 65_000, 130_000}, nil},
		{Rule{5_240_000, 65_000, 5_240_000}, nil},
		{Rule{5_241_000, 65_000, 130_000}, []string{"reserve:reserve_range"}},
		{Rule{130_000, 65_000, 130_000}, []string{"reserve:reserve_range"}},
		{Rule{131_500, 65_000, 130_000}, []string{"reserve:step"}},
		{Rule{262_000, 64_000, 130_000}, []string{"low:low_min"}},
		{Rule{262_000, 65_000, 129_000}, []string{"high:gap_min"}},
		{Rule{262_000, 131_000, 131_000}, []string{"high:gap_min", "high:high_above_low"}},
		{Rule{262_000, 65_000, 263_000}, []string{"high:high_within_reserve"}},
		{Rule{262_000, 65_500, 200_500}, []string{"high:step", "low:step"}},
	}
	for _, c := range cases {
		if got := rules(c.r); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.r, got, c.want)
		}
	}
}

func TestTopUpToHighInSteps(t *testing.T) {
	r := Rule{Reserve: 1_300_000, Low: 130_000, High: 650_000}
	cases := []struct {
		available, amount int64
		due               bool
	}{
		{130_000, 0, false},
		{129_999, 521_000, true}, // 520,001 rounded up to the step
		{0, 650_000, true},
		{-5, 650_000, true},
	}
	for _, c := range cases {
		amount, due := TopUp(r, c.available)
		if amount != c.amount || due != c.due {
			t.Errorf("available %d: %d %v, want %d %v", c.available, amount, due, c.amount, c.due)
		}
	}
	// basic (low = high) tops up in whole uses
	if amount, due := TopUp(Rule{131_000, 131_000, 131_000}, 130_000); !due || amount != EnergyPerUse {
		t.Errorf("basic: %d %v", amount, due)
	}
	if !FitsReserve(r, 650_000, 650_000) || FitsReserve(r, 650_001, 650_000) {
		t.Error("FitsReserve")
	}
	if UsesWithinReservePerDay(131_000) != 48 || UsesWithinReservePerDay(5_240_000) != 1_920 {
		t.Error("UsesWithinReservePerDay")
	}
}

func TestUpgradeChargeSun(t *testing.T) {
	const trx = SunPerTRX
	for _, c := range []struct {
		covered, fee int64
		left         time.Duration
		want         int64
	}{
		{6 * trx, 240 * trx, BillingDay, 234 * trx},
		{6 * trx, 240 * trx, BillingDay - time.Second, 234 * trx}, // 233.997 rounds up
		{6 * trx, 240 * trx, 12 * time.Hour, 117 * trx},
		{6 * trx, 60 * trx, time.Minute, 1 * trx}, // 0.0375 TRX rounds up to one
		{240 * trx, 240 * trx, BillingDay, 0},     // paid already today
		{240 * trx, 6 * trx, BillingDay, 0},       // a downgrade refunds nothing
		{6 * trx, 240 * trx, 0, 0},                // the day is over: the daily charge takes it
		{6 * trx, 240 * trx, 48 * time.Hour, 234 * trx},
	} {
		if got := UpgradeChargeSun(c.covered, c.fee, c.left); got != c.want {
			t.Errorf("UpgradeChargeSun(%d, %d, %s) = %d, want %d", c.covered, c.fee, c.left, got, c.want)
		}
	}
}
