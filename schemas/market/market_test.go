package market

import (
	"encoding/json"
	"testing"
	"time"

	"rental/schemas/events"
)

func cs(v int64) *events.Centisun { c := events.Centisun(v); return &c }
func i64(v int64) *int64          { return &v }

func TestSavingsRoundsToTwoDecimals(t *testing.T) {
	for _, c := range []struct {
		price events.Centisun
		burn  int64
		want  Fraction
	}{
		{6000, 100, 40},   // 60 SUN against 100: 0.40
		{6050, 100, 40},   // 0.395 rounds half away from zero to 0.40
		{6049, 100, 40},   // 0.3951
		{6150, 100, 39},   // 0.385 -> 0.39
		{10000, 100, 0},   // same as burning
		{12550, 100, -26}, // -0.255 -> -0.26
		{0, 420, 100},
	} {
		if got := Savings(c.price, c.burn); got != c.want {
			t.Errorf("Savings(%d, %d) = %d, want %d", c.price, c.burn, got, c.want)
		}
	}
	b, _ := json.Marshal(Fraction(40))
	if string(b) != "0.4" {
		t.Errorf("Fraction(40) prints %s", b)
	}
	b, _ = json.Marshal(Fraction(-26))
	if string(b) != "-0.26" {
		t.Errorf("Fraction(-26) prints %s", b)
	}
}

func TestBoardRanksSortsAndMarksStale(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	provs := []Provider{
		{Slug: "dear", Name: "Dear", Enabled: true, Kinds: []Kind{KindAPI}},
		{Slug: "cheap", Name: "Cheap", Enabled: true},
		{Slug: "gone", Name: "Gone", Enabled: true},
		{Slug: "never", Name: "Never", Enabled: true},
		{Slug: "off", Name: "Off", Enabled: false},
		{Slug: "nodata", Name: "No 1h", Enabled: true},
	}
	latest := map[string]Sample{
		"dear":   {Slug: "dear", TS: now.Add(-time.Minute), Quote: Quote{PriceSun1h: cs(9000), AvailableEnergy: i64(10)}},
		"cheap":  {Slug: "cheap", TS: now.Add(-2 * time.Minute), Quote: Quote{PriceSun1h: cs(5025), PriceSun1d: cs(8000)}},
		"gone":   {Slug: "gone", TS: now.Add(-16 * time.Minute), Quote: Quote{PriceSun1h: cs(4000)}},
		"off":    {Slug: "off", TS: now, Quote: Quote{PriceSun1h: cs(1)}},
		"nodata": {Slug: "nodata", TS: now, Quote: Quote{PriceSun1d: cs(7000)}},
	}
	b := BuildBoard(now, 100, provs, latest)
	var order []string
	for _, r := range b.Providers {
		order = append(order, r.Slug)
	}
	want := []string{"gone", "cheap", "dear", "never", "nodata"}
	if len(order) != len(want) {
		t.Fatalf("rows %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("rows %v, want %v", order, want)
		}
	}
	row := map[string]Row{}
	for _, r := range b.Providers {
		row[r.Slug] = r
	}
	if r := row["gone"]; !r.Stale || r.Rank == nil || *r.Rank != 1 {
		t.Errorf("a 16-minute-old sample: stale with its last price ranked: %+v", r)
	}
	if r := row["cheap"]; r.Stale || *r.Rank != 2 || *r.SavingsPct != 50 {
		t.Errorf("cheap %+v", r)
	}
	if r := row["never"]; !r.Stale || r.Rank != nil || r.TS != nil || r.SavingsPct != nil {
		t.Errorf("never sampled %+v", r)
	}
	if r := row["nodata"]; r.Stale || r.Rank != nil {
		t.Errorf("no 1 h price: fresh, no rank: %+v", r)
	}
	// Average of the fresh 1 h prices: (50.25 + 90) / 2 = 70.125 -> 70.13.
	if b.Summary.ActiveProviders != 2 || *b.Summary.AvgPriceSun1h != 7013 {
		t.Errorf("summary %+v avg %v", b.Summary, *b.Summary.AvgPriceSun1h)
	}
	raw, _ := json.Marshal(b)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	r0 := m["providers"].([]any)[3].(map[string]any)
	for _, k := range []string{"slug", "name", "rank", "price_sun_1h", "price_sun_1d", "savings_pct", "available_energy", "total_energy", "kinds", "links", "ts", "stale"} {
		if _, ok := r0[k]; !ok {
			t.Errorf("row lacks %s: %s", k, raw)
		}
	}
	if l := r0["links"].(map[string]any); len(l) != 7 {
		t.Errorf("links %v", l)
	}

	empty := BuildBoard(now, 100, nil, nil)
	if empty.Summary.AvgPriceSun1h != nil || empty.Summary.ActiveProviders != 0 || empty.Providers == nil {
		t.Errorf("empty board %+v", empty)
	}
}

func TestSlotsAndHours(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if Slot(t0, 5*time.Minute) != Slot(t0.Add(4*time.Minute+59*time.Second), 5*time.Minute) ||
		Slot(t0, 5*time.Minute) == Slot(t0.Add(5*time.Minute), 5*time.Minute) {
		t.Error("slots are the 5-minute windows")
	}
	if CheckHours(0) == nil || CheckHours(MaxHistoryHours+1) == nil || CheckHours(1) != nil || CheckHours(MaxHistoryHours) != nil {
		t.Error("hours bounds")
	}
	if ValidSlug("ok-1") != nil || ValidSlug("Bad") == nil || ValidSlug("") == nil {
		t.Error("slugs")
	}
}
