package pricing

import (
	"errors"
	"testing"

	"rental/schemas/apierr"
	"rental/schemas/network"
)

func TestAffordableIsTheLargestAmountTheTransferPays(t *testing.T) {
	s := build(t, DefaultModel(network.Mainnet), plenty, at(9, 0, 0, 0)) // 1 h energy: 75 SUN, 72 from 500,000, 69 from 2,000,000
	for _, c := range []struct {
		budget, amount int64
	}{
		{2_400_000, 32_000},         // exactly the minimum
		{2_400_074, 32_000},         // 74 SUN short of one more unit: kept
		{3_000_000, 40_000},         // 3 TRX at 75
		{36_000_000, 500_000},       // 499,999 at 75 costs more than 500,000 at 72
		{37_499_999, 520_833},       // the 72 tier: floor(37,499,999 / 72)
		{138_000_000, 2_000_000},    // the 69 tier starts
		{1_000_000_000, 10_000_000}, // the row maximum caps it
	} {
		q, err := s.Affordable(Energy, Tier1h, c.budget)
		if err != nil {
			t.Fatalf("%d: %v", c.budget, err)
		}
		if q.Amount != c.amount || q.TotalAmountSun > c.budget {
			t.Fatalf("budget %d: amount %d total %d, want amount %d", c.budget, q.Amount, q.TotalAmountSun, c.amount)
		}
		// The same amount priced the way POST /v1/quotes prices it.
		if p, err := s.Price(Energy, Tier1h, q.Amount); err != nil || p.TotalAmountSun != q.TotalAmountSun {
			t.Fatalf("budget %d: Price %+v %v", c.budget, p, err)
		}
		// One unit more costs more than the budget (or leaves the row).
		if p, err := s.Price(Energy, Tier1h, q.Amount+1); err == nil && p.TotalAmountSun <= c.budget {
			t.Fatalf("budget %d: %d units cost %d, also affordable", c.budget, q.Amount+1, p.TotalAmountSun)
		}
	}
	if _, err := s.Affordable(Energy, Tier1h, 2_399_999); !errors.Is(err, ErrBelowMinimum) {
		t.Fatalf("below minimum: %v", err)
	}
	apiErr(t, func() error { _, err := s.Affordable(Energy, Tier3d, 1_000_000_000); return err }(), apierr.TierUnavailable)
	short := build(t, DefaultModel(network.Mainnet), Supply{Instant: map[Resource]int64{Energy: 10_000}}, at(9, 0, 0, 0))
	apiErr(t, func() error { _, err := short.Affordable(Energy, Tier1h, 1_000_000_000); return err }(), apierr.InsufficientSupply)
}
