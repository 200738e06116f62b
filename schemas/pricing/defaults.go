package pricing

import (
	"time"

	"rental/schemas/network"
)

// StaticSource serves one fixed snapshot (edge tests, tools).
type StaticSource struct{ Snap Snapshot }

func (s StaticSource) Current() (Snapshot, bool) { return s.Snap, true }

// DefaultModel is the model the migration 00006_pricing.sql seeds for n (a pricestore test
// keeps the two equal). docs/pricing.md explains the numbers.
func DefaultModel(n network.Network) Model {
	maxOf := func(mainnet, nile int64) int64 {
		if n == network.Nile {
			return nile
		}
		return mainnet
	}
	m := Model{
		Network:  n,
		Revision: 1,
		DayParts: []DayPart{
			{ID: "night", Label: "Night", StartMinute: 0, EndMinute: 360, FactorBPS: 8500},
			{ID: "day", Label: "Day", StartMinute: 360, EndMinute: 720, FactorBPS: 10_000},
			{ID: "peak", Label: "Peak", StartMinute: 720, EndMinute: 1080, FactorBPS: 11_000},
			{ID: "evening", Label: "Evening", StartMinute: 1080, EndMinute: 1440, FactorBPS: 9500},
		},
		Rows: []Row{
			{Resource: Bandwidth, Tier: Tier1d, BasePrice: 60_000, MinAmount: 1000, MaxAmount: maxOf(1_000_000, 100_000)},
			{Resource: Bandwidth, Tier: Tier1h, BasePrice: 40_000, MinAmount: 1000, MaxAmount: maxOf(1_000_000, 100_000), Enabled: true},
			{Resource: Bandwidth, Tier: Tier5m, BasePrice: 30_000, MinAmount: 1000, MaxAmount: maxOf(1_000_000, 100_000), Enabled: true},
			{Resource: Energy, Tier: Tier1d, BasePrice: 9000, MinAmount: 32_000, MaxAmount: maxOf(10_000_000, 1_000_000), FollowsSchedule: true},
			{Resource: Energy, Tier: Tier1h, BasePrice: 7500, MinAmount: 32_000, MaxAmount: maxOf(10_000_000, 1_000_000), Enabled: true, FollowsSchedule: true,
				VolumeSteps: []VolumeStep{{500_000, 7200}, {2_000_000, 6900}}},
			{Resource: Energy, Tier: Tier5m, BasePrice: 6000, MinAmount: 32_000, MaxAmount: maxOf(5_000_000, 1_000_000), Enabled: true, FollowsSchedule: true,
				VolumeSteps: []VolumeStep{{1_000_000, 5700}}},
		},
		ActivationPriceSun: 1_500_000,
		MarketMarkupBPS:    1500,
		DeepMarkupBPS:      1000,
		PaymentAddresses:   map[string]string{},
		ValidFor:           10 * time.Second,
	}
	if n == network.Nile { // the 2,000,000 step is above nile's maximum
		m.Rows[4].VolumeSteps = m.Rows[4].VolumeSteps[:1]
	}
	return m
}
