package payments

import (
	"testing"
	"time"

	"rental/schemas/network"
	"rental/schemas/pricing"
)

func snapshot(t *testing.T, energy int64) pricing.Snapshot {
	t.Helper()
	s, err := pricing.Build(pricing.Inputs{Model: pricing.DefaultModel(network.Mainnet),
		Supply: pricing.Supply{Instant: map[pricing.Resource]int64{pricing.Energy: energy, pricing.Bandwidth: 5_000_000}},
		Now:    time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)}) // factor 1.00: 1 h energy at 75 SUN
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDecide(t *testing.T) {
	s := snapshot(t, 50_000_000)
	act, _ := s.ActivationPriceSun()
	r := Rules{MaxSun: 2_000_000_000, DustSun: 1_000_000}
	for _, c := range []struct {
		name     string
		amount   int64
		activate bool
		want     Decision
	}{
		{"exact minimum", 2_400_000, false, Decision{Order: true, Amount: 32_000, PriceSun: 2_400_000}},
		{"rest of a unit kept", 3_000_070, false, Decision{Order: true, Amount: 40_000, PriceSun: 3_000_000, KeptSun: 70}},
		{"activation paid", 2_400_000 + act, true, Decision{Order: true, Amount: 32_000, Activate: true, PriceSun: 2_400_000 + act}},
		{"activation unpaid", 2_400_000, true, Decision{RefundSun: 2_400_000, Reason: ReasonActivation}},
		{"below minimum", 2_000_000, false, Decision{RefundSun: 2_000_000, Reason: ReasonBelowMinimum}},
		{"dust kept", 999_999, false, Decision{KeptSun: 999_999, Reason: ReasonDust}},
		{"above maximum", 2_000_000_001, false, Decision{RefundSun: 2_000_000_001, Reason: ReasonAboveMaximum}},
		{"above the row", 1_000_000_000, false, Decision{RefundSun: 1_000_000_000, Reason: ReasonAboveRow}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := r.Decide(s, pricing.Energy, pricing.Tier1h, c.amount, c.activate); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
	if got := r.Decide(snapshot(t, 100_000), pricing.Energy, pricing.Tier1h, 100_000_000, false); got.Reason != ReasonSupplyShort {
		t.Fatalf("short book: %+v", got)
	}
	if got := r.Decide(s, pricing.Energy, pricing.Tier3d, 100_000_000, false); got.Reason != ReasonRowUnavailable {
		t.Fatalf("retired tier: %+v", got)
	}
}

func TestRowKeysAndIndexes(t *testing.T) {
	seen := map[uint32]string{}
	for _, key := range Rows(snapshot(t, 50_000_000)) {
		r, tier, err := ParseRowKey(key)
		if err != nil || RowKey(r, tier) != key {
			t.Fatalf("%s: %s %s %v", key, r, tier, err)
		}
		i, err := Index(r, tier)
		if err != nil || i < IndexBase || seen[i] != "" {
			t.Fatalf("%s: index %d (also %q) %v", key, i, seen[i], err)
		}
		seen[i] = key
	}
	if len(seen) == 0 {
		t.Fatal("no rows on sale")
	}
	for _, bad := range []string{"energy", "activation_1h", "energy_2h", "_1h"} {
		if _, _, err := ParseRowKey(bad); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
