package events_test

import (
	"encoding/json"
	"testing"
	"time"

	"rental/schemas/network"
	"rental/schemas/pricing"
)

func TestMarketDataMatchesItsSchema(t *testing.T) {
	s := compile(t, "marketdata.schema.json")
	m := pricing.DefaultModel(network.Nile)
	m.Rows[4].Paused = true // energy 1h: null schedule prices, a paused rule
	snap, err := pricing.Build(pricing.Inputs{Model: m, Now: time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC), Supply: pricing.Supply{
		Instant: map[pricing.Resource]int64{pricing.Energy: 1_000_000},
		Offers:  []pricing.Offer{{Class: pricing.ClassMarket, Source: "p", Resource: pricing.Energy, Tier: pricing.Tier5m, Cost: 6201, Amount: 5}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rec := snap.Record()
	if err := s.Validate(instance(t, rec)); err != nil {
		t.Fatalf("a record made by pricing fails its schema: %v", err)
	}
	bad := map[string]func(m map[string]any){
		"three decimals": func(m map[string]any) {
			m["books"].([]any)[0].(map[string]any)["levels"].([]any)[0].(map[string]any)["price_sun"] = 60.001
		},
		"retired tier row": func(m map[string]any) { m["rules"].([]any)[0].(map[string]any)["tier"] = "3d" },
		"float total":      func(m map[string]any) { m["prices"].(map[string]any)["available_energy"] = 1.5 },
		"unknown class": func(m map[string]any) {
			m["books"].([]any)[0].(map[string]any)["levels"].([]any)[0].(map[string]any)["class"] = "pool"
		},
		"version 2": func(m map[string]any) { m["version"] = 2 },
	}
	for name, mutate := range bad {
		var doc map[string]any
		b, _ := json.Marshal(rec)
		_ = json.Unmarshal(b, &doc)
		mutate(doc)
		if err := s.Validate(instance(t, doc)); err == nil {
			t.Errorf("%s: schema accepted it", name)
		}
	}
}
