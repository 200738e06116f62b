// Package autorefill is the subscription domain (rental-api-v1 "Subscription",
// "Subscription rule constants", "Subscription status"): the plan rule (reserve, low, high)
// and its limits, the presets and their daily fee, the legacy rule, statuses and reasons,
// and the pure arithmetic of a top-up. It knows no SQL and no HTTP: infra/substore persists
// subscriptions, edge/subscriptions.go serves them, processors/subscriptions watches them.
// docs/subscriptions.md explains every choice.
package autorefill

import (
	"fmt"
	"slices"
	"time"
)

// Rule constants of the spec.
const (
	ReserveMin   int64 = 131_000
	ReserveMax   int64 = 5_240_000
	Step         int64 = 1_000
	LowMin       int64 = 65_000
	GapMin       int64 = 65_000
	EnergyPerUse int64 = 65_000 // per_use.energy_per_use; also the smallest top-up

	// Daily fee: ceil(reserve x FeeTRXPerUnit / FeeUnitEnergy) whole TRX.
	FeeTRXPerUnit int64 = 6
	FeeUnitEnergy int64 = 131_000
	SunPerTRX     int64 = 1_000_000
)

// Rule is a plan subscription's three numbers (energy units).
type Rule struct {
	Reserve int64 `json:"reserve"`
	Low     int64 `json:"low"`
	High    int64 `json:"high"`
}

// Violation is one broken rule constant, listed in 3020's details.violations.
type Violation struct {
	Field   string `json:"field"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// basicException is the one rule outside the general limits the spec admits.
func (r Rule) basicException() bool {
	return r.Reserve == ReserveMin && r.Low == ReserveMin && r.High == ReserveMin
}

// Validate lists every violation of the rule constants (none means valid). All are
// reported at once so a client can fix the rule in one round.
func (r Rule) Validate() []Violation {
	if r.basicException() {
		return nil
	}
	var v []Violation
	add := func(field, rule, format string, args ...any) {
		v = append(v, Violation{Field: field, Rule: rule, Message: fmt.Sprintf(format, args...)})
	}
	if r.Reserve < ReserveMin || r.Reserve > ReserveMax {
		add("reserve", "reserve_range", "reserve must be from %d to %d", ReserveMin, ReserveMax)
	}
	if r.Reserve%Step != 0 {
		add("reserve", "step", "reserve must be a multiple of %d", Step)
	}
	if r.Low < LowMin {
		add("low", "low_min", "low must be at least %d", LowMin)
	}
	if r.Low%Step != 0 {
		add("low", "step", "low must be a multiple of %d", Step)
	}
	if r.High%Step != 0 {
		add("high", "step", "high must be a multiple of %d", Step)
	}
	if r.High <= r.Low {
		add("high", "high_above_low", "high must be greater than low")
	}
	if r.High > r.Reserve {
		add("high", "high_within_reserve", "high must be at most reserve")
	}
	if r.High-r.Low < GapMin {
		add("high", "gap_min", "high minus low must be at least %d", GapMin)
	}
	return v
}

// DailyFeeSun is the plan's fee per day: ceil(reserve x 6 / 131,000) whole TRX, in SUN.
func DailyFeeSun(reserve int64) int64 {
	trx := (reserve*FeeTRXPerUnit + FeeUnitEnergy - 1) / FeeUnitEnergy
	return trx * SunPerTRX
}

// UpgradeChargeSun is what raising a plan's daily fee from covered (the fee level already
// paid for the current billing day) to fee costs for the part of that day still left
// (the time until next_billing_at): the difference pro rata to left over 24 h, rounded up
// to whole TRX like the fee itself. It is 0 when the fee does not rise above covered or
// the day is over (the next daily charge takes the new fee in full). A downgrade refunds
// nothing, so covered stays the highest level paid that day.
func UpgradeChargeSun(covered, fee int64, left time.Duration) int64 {
	if fee <= covered || left <= 0 {
		return 0
	}
	left = min(left, BillingDay)
	// diff <= 240 TRX (2.4e8 SUN) times at most 8.64e7 ms: well inside int64.
	owed := ((fee-covered)*left.Milliseconds() + BillingDay.Milliseconds() - 1) / BillingDay.Milliseconds()
	return (owed + SunPerTRX - 1) / SunPerTRX * SunPerTRX
}

// BillingDay is the period one daily fee pays for.
const BillingDay = 24 * time.Hour

// Preset is a named rule.
type Preset struct {
	Slug string
	Name string
	Rule Rule
}

// Presets fill reserve, low and high; any rule inside the limits is accepted too. Apart
// from basic (the spec's exception), low is two uses and high half the reserve, so a
// second top-up still fits under the reserve while the first one's rental runs
// (docs/subscriptions.md).
var Presets = []Preset{
	{Slug: "basic", Name: "Basic", Rule: Rule{Reserve: 131_000, Low: 131_000, High: 131_000}},
	{Slug: "1.3m", Name: "1.3M", Rule: Rule{Reserve: 1_300_000, Low: 130_000, High: 650_000}},
	{Slug: "2.62m", Name: "2.62M", Rule: Rule{Reserve: 2_620_000, Low: 130_000, High: 1_310_000}},
	{Slug: "5.24m", Name: "5.24M", Rule: Rule{Reserve: 5_240_000, Low: 130_000, High: 2_620_000}},
}

// PresetBySlug finds a preset.
func PresetBySlug(slug string) (Preset, bool) {
	i := slices.IndexFunc(Presets, func(p Preset) bool { return p.Slug == slug })
	if i < 0 {
		return Preset{}, false
	}
	return Presets[i], true
}

// PresetSlugs lists the preset slugs in order.
func PresetSlugs() []string {
	out := make([]string, len(Presets))
	for i, p := range Presets {
		out[i] = p.Slug
	}
	return out
}

// PresetOf returns the slug of the preset whose rule equals r, if any.
func PresetOf(r Rule) *string {
	for _, p := range Presets {
		if p.Rule == r {
			s := p.Slug
			return &s
		}
	}
	return nil
}

// RentalHoursPerDay is how often a top-up's 1 h rental frees its share of the reserve in a
// day: the reserve caps energy delegated at once, not energy per day.
const RentalHoursPerDay = 24

// UsesWithinReservePerDay is how many uses of EnergyPerUse the reserve carries in a day:
// whole uses the reserve holds at once, renewed every hour (docs/subscriptions.md).
func UsesWithinReservePerDay(reserve int64) int64 {
	return reserve / EnergyPerUse * RentalHoursPerDay
}

// TopUp is how much energy a plan subscription orders when available < low: enough to
// bring it to high, rounded up to the step, and at least one use (EnergyPerUse), so the
// basic preset (low = high) tops up in whole uses. ok is false when no top-up is due.
func TopUp(r Rule, available int64) (amount int64, ok bool) {
	if available >= r.Low {
		return 0, false
	}
	need := r.High - max(available, 0)
	need = (need + Step - 1) / Step * Step
	return max(need, EnergyPerUse), true
}

// FitsReserve reports whether amount more energy keeps what the subscription has delegated
// at once within the reserve.
func FitsReserve(r Rule, delegated, amount int64) bool {
	return delegated+amount <= r.Reserve
}

// SmallestTopUp is the refill_amount a plan subscription shows: its smallest top-up, the
// gap between low and high (at least one use).
func SmallestTopUp(r Rule) int64 {
	return max(r.High-r.Low, EnergyPerUse)
}
