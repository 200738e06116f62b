package pricing

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
)

// at is a UTC instant on a fixed day.
func at(hh, mm, ss, ms int) time.Time {
	return time.Date(2026, 3, 10, hh, mm, ss, ms*int(time.Millisecond), time.UTC)
}

// plenty is supply deep enough for any order of the default model, instant only.
var plenty = Supply{Instant: map[Resource]int64{Energy: 50_000_000, Bandwidth: 5_000_000}}

func build(t *testing.T, m Model, s Supply, now time.Time) Snapshot {
	t.Helper()
	snap, err := Build(Inputs{Model: m, Supply: s, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func apiErr(t *testing.T, err error, want *apierr.Code) *apierr.Error {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) || e.Code != want {
		t.Fatalf("error %v, want %d %s", err, want.Code, want.Slug)
	}
	return e
}

func item(t *testing.T, s Snapshot, r Resource, tier Tier) PriceItem {
	t.Helper()
	for _, it := range s.Table.Items {
		if it.Resource == r && it.Tier == tier {
			return it
		}
	}
	t.Fatalf("no item %s %s in %+v", r, tier, s.Table.Items)
	return PriceItem{}
}

func TestDayPartBoundaries(t *testing.T) {
	m := DefaultModel(network.Mainnet)
	for _, c := range []struct {
		name      string
		now       time.Time
		part      string
		start     string
		end       string
		price1h   int64    // items[energy 1h].price_sun_per_unit
		exact1h   Centisun // schedule / rule price
		cheaper   string   // "" for null
		bandwidth int64    // bandwidth 1h does not follow the schedule
	}{
		{"midnight UTC is minute 0 of night", at(0, 0, 0, 0), "night", "00:00", "06:00", 64, 6375, "", 400},
		{"last minute of night", at(5, 59, 59, 999), "night", "00:00", "06:00", 64, 6375, "", 400},
		{"first minute of day", at(6, 0, 0, 0), "day", "06:00", "12:00", 75, 7500, "2026-03-10T18:00:00.000Z", 400},
		{"last minute of day", at(11, 59, 59, 999), "day", "06:00", "12:00", 75, 7500, "2026-03-10T18:00:00.000Z", 400},
		{"first minute of peak", at(12, 0, 0, 0), "peak", "12:00", "18:00", 83, 8250, "2026-03-10T18:00:00.000Z", 400},
		{"last minute of peak", at(17, 59, 59, 999), "peak", "12:00", "18:00", 83, 8250, "2026-03-10T18:00:00.000Z", 400},
		{"first minute of evening", at(18, 0, 0, 0), "evening", "18:00", "24:00", 72, 7125, "2026-03-11T00:00:00.000Z", 400},
		{"last minute before midnight", at(23, 59, 59, 999), "evening", "18:00", "24:00", 72, 7125, "2026-03-11T00:00:00.000Z", 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := build(t, m, plenty, c.now)
			if p := s.Table.Period; p.ID != c.part || p.Start != c.start || p.End != c.end {
				t.Fatalf("period %+v, want %s %s-%s", p, c.part, c.start, c.end)
			}
			if got := item(t, s, Energy, Tier1h).PriceSunPerUnit; got != c.price1h {
				t.Fatalf("energy 1h price %d, want %d", got, c.price1h)
			}
			if got := s.Rules[BookKey{Energy, Tier1h}].UnitPriceSun; got != c.exact1h {
				t.Fatalf("energy 1h exact price %s, want %s", got, c.exact1h)
			}
			if got := item(t, s, Bandwidth, Tier1h).PriceSunPerUnit; got != c.bandwidth {
				t.Fatalf("bandwidth 1h price %d, want %d", got, c.bandwidth)
			}
			b := s.Books[BookKey{Energy, Tier1h}]
			var got string
			if b.CheaperFrom != nil {
				got = events.FormatTime(time.Time(*b.CheaperFrom))
			}
			if got != c.cheaper {
				t.Fatalf("cheaper_from %q, want %q", got, c.cheaper)
			}
			if bb := s.Books[BookKey{Bandwidth, Tier1h}]; bb.CheaperFrom != nil {
				t.Fatal("bandwidth does not follow the schedule but has cheaper_from")
			}
			// The quote of a small order is the table's price.
			q, err := s.Price(Energy, Tier1h, 32_000)
			if err != nil || q.UnitPriceSun != c.exact1h || q.PriceSunPerUnit != c.price1h {
				t.Fatalf("quote %+v %v", q, err)
			}
		})
	}
}

func TestScheduleListsEveryPartWithItsPrice(t *testing.T) {
	s := build(t, DefaultModel(network.Mainnet), plenty, at(9, 0, 0, 0))
	var got []string
	for _, p := range s.Table.Schedule {
		got = append(got, p.ID+"="+p.PriceSunPerUnit.String())
	}
	want := []string{"night=63.75", "day=75", "peak=82.5", "evening=71.25"}
	if !slices.Equal(got, want) {
		t.Fatalf("schedule %v, want %v", got, want)
	}
	if s.Table.Schedule[0].StartUTCMinute != 0 || s.Table.Schedule[3].EndUTCMinute != 1440 {
		t.Fatal("schedule does not span the day")
	}
}

func TestVolumeTierBoundaries(t *testing.T) {
	s := build(t, DefaultModel(network.Mainnet), plenty, at(9, 0, 0, 0)) // factor 1.00
	for _, c := range []struct {
		amount int64
		unit   Centisun
	}{
		{32_000, 7500}, {499_999, 7500}, {500_000, 7200}, {1_999_999, 7200}, {2_000_000, 6900}, {10_000_000, 6900},
	} {
		q, err := s.Price(Energy, Tier1h, c.amount)
		if err != nil {
			t.Fatalf("%d: %v", c.amount, err)
		}
		if q.UnitPriceSun != c.unit || q.EnergyAmountSun != c.amount*int64(c.unit)/100 || len(q.Fills) != 0 {
			t.Fatalf("%d: unit %s total %d fills %v, want unit %s", c.amount, q.UnitPriceSun, q.EnergyAmountSun, q.Fills, c.unit)
		}
	}
	it := item(t, s, Energy, Tier1h)
	want := []events.VolumeTier{{MinAmount: 32_000, PriceSunPerUnit: 75}, {MinAmount: 500_000, PriceSunPerUnit: 72}, {MinAmount: 2_000_000, PriceSunPerUnit: 69}}
	if !reflect.DeepEqual(it.VolumeTiers, want) {
		t.Fatalf("volume tiers %+v", it.VolumeTiers)
	}
	// Volume tiers follow the day-part: 72 x 0.85 = 61.20 at night.
	night := build(t, DefaultModel(network.Mainnet), plenty, at(1, 0, 0, 0))
	if q, _ := night.Price(Energy, Tier1h, 500_000); q.UnitPriceSun != 6120 {
		t.Fatalf("night volume price %s", q.UnitPriceSun)
	}
}

func TestAmountLimits(t *testing.T) {
	s := build(t, DefaultModel(network.Mainnet), plenty, at(9, 0, 0, 0))
	for _, c := range []struct {
		tier   Tier
		amount int64
		ok     bool
	}{
		{Tier1h, 0, false}, {Tier1h, 31_999, false}, {Tier1h, 32_000, true}, {Tier1h, 10_000_000, true}, {Tier1h, 10_000_001, false},
		{Tier5m, 5_000_000, true}, {Tier5m, 5_000_001, false}, {Tier1h, -1, false},
	} {
		_, err := s.Price(Energy, c.tier, c.amount)
		if c.ok {
			if err != nil {
				t.Fatalf("%s %d: %v", c.tier, c.amount, err)
			}
			continue
		}
		e := apiErr(t, err, apierr.AmountOutOfRange)
		if e.Field != "amount" || e.Details["min_amount"] != int64(32_000) || e.Details["max_amount"] == nil {
			t.Fatalf("%s %d: %+v", c.tier, c.amount, e)
		}
	}
	// The orderbook walk checks the same limits.
	if _, err := s.OrderBook(Energy, Tier1h, 31_999); err == nil {
		t.Fatal("orderbook walk of 31,999 accepted")
	}
}

func TestTiers(t *testing.T) {
	s := build(t, DefaultModel(network.Mainnet), plenty, at(9, 0, 0, 0))
	for _, tier := range []Tier{Tier5m, Tier1h} {
		for _, r := range []Resource{Energy, Bandwidth} {
			min := int64(32_000)
			if r == Bandwidth {
				min = 1000
			}
			if _, err := s.Price(r, tier, min); err != nil {
				t.Fatalf("%s %s not sold: %v", r, tier, err)
			}
		}
	}
	for _, tier := range []Tier{Tier1d, Tier15m, Tier3d, Tier30d} {
		e := apiErr(t, func() error { _, err := s.Price(Energy, tier, 32_000); return err }(), apierr.TierUnavailable)
		if !reflect.DeepEqual(e.Details["available_tiers"], []Tier{Tier5m, Tier1h}) {
			t.Fatalf("%s: available_tiers %v", tier, e.Details["available_tiers"])
		}
		if _, err := s.OrderBook(Bandwidth, tier, 0); !errors.Is(err, apierr.TierUnavailable) {
			t.Fatalf("orderbook %s: %v", tier, err)
		}
	}
	if _, err := s.Price(Energy, "2h", 32_000); apiErr(t, err, apierr.ValidationFailed).Field != "tier" {
		t.Fatal("unknown tier not on field tier")
	}
	if _, err := s.Price("cpu", Tier1h, 32_000); apiErr(t, err, apierr.ValidationFailed).Field != "resource" {
		t.Fatal("unknown resource not on field resource")
	}
	// 1d is listed, switched off; retired tiers are not listed at all.
	if it := item(t, s, Energy, Tier1d); it.Available || item(t, s, Energy, Tier1h).Available != true {
		t.Fatal("availability flags wrong")
	}
	for _, it := range s.Table.Items {
		if Retired(it.Tier) {
			t.Fatalf("retired tier listed: %+v", it)
		}
	}
	if TierSeconds(Tier5m) != 300 || TierSeconds(Tier1h) != 3600 || TierDuration(Tier1d) != 24*time.Hour || TierSeconds(Tier30d) != 2_592_000 {
		t.Fatal("tier durations")
	}
	for _, tier := range Tiers {
		if _, err := ParseTier(string(tier)); err != nil {
			t.Fatalf("tier %s does not parse", tier)
		}
	}
}

func TestPausedRowDisappearsAndRefusesWith5006(t *testing.T) {
	m := DefaultModel(network.Mainnet)
	for i := range m.Rows {
		if m.Rows[i].Key() == (BookKey{Energy, Tier1h}) {
			m.Rows[i].Paused = true
		}
	}
	m.ActivationPaused = true
	s := build(t, m, plenty, at(9, 0, 0, 0))
	if _, err := s.Price(Energy, Tier1h, 32_000); !errors.Is(err, apierr.SupplyPaused) {
		t.Fatalf("paused row: %v", err)
	}
	if _, err := s.OrderBook(Energy, Tier1h, 0); !errors.Is(err, apierr.SupplyPaused) {
		t.Fatalf("paused book: %v", err)
	}
	for _, it := range s.Table.Items {
		if it.Resource == Energy && it.Tier == Tier1h {
			t.Fatal("paused row listed")
		}
	}
	if s.Table.AvailableEnergy != 0 || s.Table.Schedule[0].PriceSunPerUnit != nil {
		t.Fatalf("paused 1h energy still advertised: available %d, schedule %v", s.Table.AvailableEnergy, s.Table.Schedule[0].PriceSunPerUnit)
	}
	// 1d stays off (2003) and 5m stays on sale.
	e := apiErr(t, func() error { _, err := s.Price(Energy, Tier1d, 32_000); return err }(), apierr.TierUnavailable)
	if !reflect.DeepEqual(e.Details["available_tiers"], []Tier{Tier5m}) {
		t.Fatalf("available_tiers %v", e.Details["available_tiers"])
	}
	if s.Table.Activation != nil {
		t.Fatal("paused activation listed")
	}
	if _, err := s.ActivationPriceSun(); !errors.Is(err, apierr.SupplyPaused) {
		t.Fatalf("paused activation: %v", err)
	}
	if _, err := s.Price(Activation, "", 0); !errors.Is(err, apierr.SupplyPaused) {
		t.Fatalf("paused activation quote: %v", err)
	}
}

func TestActivation(t *testing.T) {
	s := build(t, DefaultModel(network.Mainnet), plenty, at(9, 0, 0, 0))
	q, err := s.Price(Activation, "whatever", 123) // tier and amount do not apply
	if err != nil || q.ActivateAmountSun != 1_500_000 || q.TotalAmountSun != 1_500_000 || q.EnergyAmountSun != 0 {
		t.Fatalf("activation quote %+v %v", q, err)
	}
	if s.Table.Activation == nil || s.Table.Activation.PriceSun != 1_500_000 {
		t.Fatal("activation price missing from the table")
	}
	if _, err := s.OrderBook(Activation, Tier1h, 0); !errors.Is(err, apierr.ValidationFailed) {
		t.Fatal("activation has a book")
	}
}

// threeClasses is 100,000 own energy, 200,000 from a provider at cost 78.00 (sold at +15 % =
// 89.70) and 1,000,000 from the deep reserve at cost 85.00 (sold at +10 % = 93.50).
var threeClasses = Supply{
	Instant: map[Resource]int64{Energy: 100_000},
	Offers: []Offer{
		{Class: ClassMarket, Source: "p1", Resource: Energy, Tier: Tier1h, Cost: 7800, Amount: 200_000},
		{Class: ClassDeep, Source: "deep", Resource: Energy, Tier: Tier1h, Cost: 8500, Amount: 1_000_000},
		{Class: ClassMarket, Source: "p1", Resource: Energy, Tier: Tier5m, Cost: 1, Amount: 7}, // other tier
	},
}

func TestWalkAcrossInstantMarketDeep(t *testing.T) {
	s := build(t, DefaultModel(network.Mainnet), threeClasses, at(9, 0, 0, 0))
	b := s.Books[BookKey{Energy, Tier1h}]
	wantLevels := []Level{lv(7500, 100_000, ClassInstant), lv(8970, 200_000, ClassMarket), lv(9350, 1_000_000, ClassDeep)}
	if !reflect.DeepEqual(b.Levels, wantLevels) || b.Depth != 1_300_000 || *b.FloorSun != 7500 {
		t.Fatalf("book %+v", b)
	}
	if s.Table.AvailableEnergy != 1_300_000 {
		t.Fatalf("available_energy %d", s.Table.AvailableEnergy)
	}
	for _, c := range []struct {
		name     string
		amount   int64
		fills    []Fill
		unit     Centisun
		total    int64
		perUnit  int64
		complete bool
		out      int64
	}{
		{"inside instant", 100_000, []Fill{fl(7500, 100_000, ClassInstant)}, 7500, 7_500_000, 75, true, 0},
		{"instant then market", 250_000, []Fill{fl(7500, 100_000, ClassInstant), fl(8970, 150_000, ClassMarket)}, 8382, 20_955_000, 84, true, 0},
		{"all three", 1_300_000, []Fill{fl(7200, 100_000, ClassInstant), fl(8970, 200_000, ClassMarket), fl(9350, 1_000_000, ClassDeep)}, 9126, 118_640_000, 92, true, 0},
		{"beyond depth", 2_000_000, []Fill{fl(6900, 100_000, ClassInstant), fl(8970, 200_000, ClassMarket), fl(9350, 1_000_000, ClassDeep)}, 9103, 118_340_000, 0, false, 700_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			ob, err := s.OrderBook(Energy, Tier1h, c.amount)
			if err != nil {
				t.Fatal(err)
			}
			w := ob.Walk
			if !reflect.DeepEqual(w.Fills, c.fills) || w.UnitPriceSun != c.unit || w.TotalSun != c.total || w.Complete != c.complete || w.Outstanding != c.out || w.Amount != c.amount {
				t.Fatalf("walk %+v", *w)
			}
			q, err := s.Price(Energy, Tier1h, c.amount)
			if !c.complete {
				if e := apiErr(t, err, apierr.InsufficientSupply); e.Details["available"] != int64(1_300_000) {
					t.Fatalf("5001 details %v", e.Details)
				}
				return
			}
			if err != nil || q.UnitPriceSun != c.unit || q.EnergyAmountSun != c.total || q.TotalAmountSun != c.total || q.PriceSunPerUnit != c.perUnit {
				t.Fatalf("quote %+v %v", q, err)
			}
			if uniform := len(c.fills) == 1; uniform != (len(q.Fills) == 0) || len(q.Walk.Fills) != len(c.fills) {
				t.Fatalf("quote fills %v (walk %v)", q.Fills, q.Walk.Fills)
			}
		})
	}
}

func TestResoldSupplyNeverBelowListPrice(t *testing.T) {
	sup := Supply{Offers: []Offer{
		{Class: ClassMarket, Source: "cheap", Resource: Energy, Tier: Tier1h, Cost: 3000, Amount: 50_000},
		{Class: ClassMarket, Source: "other", Resource: Energy, Tier: Tier1h, Cost: 3100, Amount: 50_000},
	}}
	s := build(t, DefaultModel(network.Mainnet), sup, at(9, 0, 0, 0))
	b := s.Books[BookKey{Energy, Tier1h}]
	if !reflect.DeepEqual(b.Levels, []Level{lv(7500, 100_000, ClassMarket)}) {
		t.Fatalf("levels %+v: want the cheap offers merged at the list price", b.Levels)
	}
	empty := build(t, DefaultModel(network.Mainnet), Supply{}, at(9, 0, 0, 0))
	eb, err := empty.OrderBook(Energy, Tier1h, 0)
	if err != nil || eb.FloorSun != nil || eb.Depth != 0 || eb.Levels == nil {
		t.Fatalf("empty book %+v %v", eb, err)
	}
	if _, err := empty.Price(Energy, Tier1h, 32_000); !errors.Is(err, apierr.InsufficientSupply) {
		t.Fatalf("empty book quote: %v", err)
	}
}

func TestFixedPointRounding(t *testing.T) {
	for _, c := range []struct {
		price Centisun
		bps   int64
		want  Centisun
	}{
		{7500, 8500, 6375}, {7501, 8500, 6376}, // 6375.85 -> up
		{7503, 10_001, 7504}, // 7503.7503 -> 7504
		{1, 5000, 1},         // 0.5 exactly: half up
		{3, 5000, 2},         // 1.5 -> 2
		{1, 4999, 0},         // 0.4999 -> 0
		{9, 1, 0},            // 0.0009 -> 0
	} {
		if got, err := ApplyBPS(c.price, c.bps); err != nil || got != c.want {
			t.Errorf("ApplyBPS(%d, %d) = %d %v, want %d", c.price, c.bps, got, err, c.want)
		}
	}
	for _, c := range []struct {
		cost   Centisun
		markup int64
		want   Centisun
	}{{7800, 1500, 8970}, {7801, 1500, 8972}, {1, 1, 2}, {10_000, 0, 10_000}} {
		if got, _ := MarkupBPS(c.cost, c.markup); got != c.want {
			t.Errorf("MarkupBPS(%d, %d) = %d, want %d", c.cost, c.markup, got, c.want)
		}
	}
	for _, c := range []struct {
		c    Centisun
		want int64
	}{{0, 0}, {1, 1}, {7500, 75}, {7501, 76}, {7599, 76}, {7600, 76}} {
		if got := CeilSun(c.c); got != c.want {
			t.Errorf("CeilSun(%d) = %d, want %d", c.c, got, c.want)
		}
	}
	// A walk whose exact mean is x.xx5: 1 unit at 75.00 and 1 at 75.01 -> 75.005 -> 75.01
	// (half up); total 150.01 SUN -> 151 (up); per-unit integer ceil(75.005) = 76.
	levels := []Level{lv(7500, 1, ClassInstant), lv(7501, 1, ClassMarket)}
	w, exact, err := walk(levels, 2, 7500)
	if err != nil || exact != 15001 || w.UnitPriceSun != 7501 || w.TotalSun != 151 {
		t.Fatalf("walk %+v exact %d %v", w, exact, err)
	}
	// 3 units at 75.00 and 1 at 75.01: mean 75.0025, below the half -> 75.00; the total
	// 300.01 SUN still rounds up to 301.
	w, _, _ = walk([]Level{lv(7500, 3, ClassInstant), lv(7501, 1, ClassMarket)}, 4, 7500)
	if w.UnitPriceSun != 7500 || w.TotalSun != 301 {
		t.Fatalf("75.0025 walk %+v", w)
	}
	// Overflow is detected, not wrapped.
	if _, err := ApplyBPS(Centisun(1<<62), 20_000); err == nil {
		t.Fatal("overflow not detected")
	}
}

func TestCentisunJSON(t *testing.T) {
	for c, s := range map[Centisun]string{0: "0", 5: "0.05", 50: "0.5", 7200: "72", 7250: "72.5", 7205: "72.05", 123456789: "1234567.89"} {
		if c.String() != s {
			t.Errorf("%d renders %q, want %q", int64(c), c.String(), s)
		}
		var back Centisun
		if err := json.Unmarshal([]byte(s), &back); err != nil || back != c {
			t.Errorf("%q reads back as %d %v", s, back, err)
		}
	}
	for _, bad := range []string{"72.055", "1e3", "-1", ".5", "5.", "\"5\"", "", "7 2"} {
		var c Centisun
		if err := json.Unmarshal([]byte(bad), &c); err == nil {
			t.Errorf("%q accepted as %d", bad, c)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	s := build(t, DefaultModel(network.Mainnet), threeClasses, at(13, 0, 0, 0))
	b, err := json.Marshal(s.Record())
	if err != nil {
		t.Fatal(err)
	}
	var md events.MarketData
	if err := json.Unmarshal(b, &md); err != nil {
		t.Fatal(err)
	}
	back, err := FromRecord(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, amount := range []int64{32_000, 250_000, 1_000_000} {
		q1, err1 := s.Price(Energy, Tier1h, amount)
		q2, err2 := back.Price(Energy, Tier1h, amount)
		q1.AsOf, q1.ValidUntil, q2.AsOf, q2.ValidUntil = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if !reflect.DeepEqual(q1, q2) || (err1 == nil) != (err2 == nil) {
			t.Fatalf("%d: %+v %v vs %+v %v", amount, q1, err1, q2, err2)
		}
	}
	if !back.AsOf.Equal(s.AsOf) || !back.ValidUntil.Equal(s.AsOf.Add(10*time.Second)) {
		t.Fatalf("times %v %v", back.AsOf, back.ValidUntil)
	}
	if _, err := back.Price(Energy, Tier1d, 32_000); !errors.Is(err, apierr.TierUnavailable) {
		t.Fatal("switched-off row lost in the record")
	}
}

func TestModelValidation(t *testing.T) {
	for name, mutate := range map[string]func(m *Model){
		"gap":                 func(m *Model) { m.DayParts[1].StartMinute = 361 },
		"overlap":             func(m *Model) { m.DayParts[1].StartMinute = 359 },
		"short day":           func(m *Model) { m.DayParts[3].EndMinute = 1439 },
		"zero factor":         func(m *Model) { m.DayParts[0].FactorBPS = 0 },
		"repeated id":         func(m *Model) { m.DayParts[1].ID = "night" },
		"retired tier row":    func(m *Model) { m.Rows[0].Tier = Tier3d },
		"step raises price":   func(m *Model) { m.Rows[4].VolumeSteps[1].Price = 7300 },
		"step above max":      func(m *Model) { m.Rows[4].VolumeSteps[1].MinAmount = 20_000_000 },
		"min above max":       func(m *Model) { m.Rows[4].MinAmount = 20_000_000 },
		"activation row":      func(m *Model) { m.Rows[0].Resource = Activation },
		"duplicate row":       func(m *Model) { m.Rows[1] = m.Rows[2] },
		"unknown network":     func(m *Model) { m.Network = "shasta" },
		"no validity":         func(m *Model) { m.ValidFor = 0 },
		"negative activation": func(m *Model) { m.ActivationPriceSun = -1 },
	} {
		m := DefaultModel(network.Mainnet)
		m.Rows = slices.Clone(m.Rows)
		m.Rows[4].VolumeSteps = slices.Clone(m.Rows[4].VolumeSteps)
		m.DayParts = slices.Clone(m.DayParts)
		mutate(&m)
		if err := m.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := Build(Inputs{Model: m, Now: at(1, 0, 0, 0)}); err == nil {
			t.Errorf("%s: built", name)
		}
	}
	if err := DefaultModel(network.Nile).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestFilterTable(t *testing.T) {
	s := build(t, DefaultModel(network.Mainnet), plenty, at(9, 0, 0, 0))
	bw := FilterTable(s.Table, Bandwidth)
	if len(bw.Items) != 3 || bw.Items[0].Resource != Bandwidth || len(s.Table.Items) != 6 {
		t.Fatalf("filtered %+v", bw.Items)
	}
	if act := FilterTable(s.Table, Activation); len(act.Items) != 0 || act.Items == nil || act.Activation == nil {
		t.Fatalf("activation filter %+v", act)
	}
}

func lv(price Centisun, amount int64, c LevelClass) Level {
	return Level{PriceSun: price, Amount: amount, Class: c}
}

func fl(price Centisun, amount int64, c LevelClass) Fill {
	return Fill{PriceSun: price, Amount: amount, Class: c}
}
