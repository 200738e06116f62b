package events_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"rental/schemas/events"
	"rental/schemas/network"
)

func compile(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	// Every file is added, so $refs between them (envelope -> payloads -> common) resolve.
	const base = "https://rental.example/schemas/events/"
	all, err := fs.Glob(events.SchemaFiles, "*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	for _, n := range all {
		raw, err := events.SchemaFiles.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s is not JSON: %v", n, err)
		}
		if err := c.AddResource(base+n, doc); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Compile(base + name)
	if err != nil {
		t.Fatalf("%s does not compile: %v", name, err)
	}
	return s
}

func instance(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestEnvelopeMatchesItsSchema(t *testing.T) {
	s := compile(t, "envelope.schema.json")
	// A type the envelope does not dispatch on: this checks the envelope alone (package
	// eventschema checks each payload through the dispatch).
	env, err := events.New("example.sent", "acc_1", network.Nile, map[string]any{"order_id": "ord_1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(instance(t, env)); err != nil {
		t.Fatalf("an envelope made by events.New fails its schema: %v", err)
	}

	// The schema must reject what a consumer could not rely on.
	bad := map[string]func(m map[string]any){
		"missing event_id": func(m map[string]any) { delete(m, "event_id") },
		"unknown network":  func(m map[string]any) { m["network"] = "shasta" },
		"version 2":        func(m map[string]any) { m["event_version"] = 2 },
		"time without ms":  func(m map[string]any) { m["created_at"] = "2026-01-01T00:00:00Z" },
		"data not object":  func(m map[string]any) { m["data"] = "x" },
	}
	for name, mutate := range bad {
		m := map[string]any{}
		b, _ := json.Marshal(env)
		_ = json.Unmarshal(b, &m)
		mutate(m)
		if err := s.Validate(instance(t, m)); err == nil {
			t.Errorf("%s: schema accepted it", name)
		}
	}
}

func TestChainFactsMatchTheirSchema(t *testing.T) {
	s := compile(t, "chainfact.schema.json")
	raw, _ := events.SchemaFiles.ReadFile("chainfact.schema.json")
	if !strings.Contains(string(raw), "2020-12") {
		t.Fatal("chainfact.schema.json does not declare draft 2020-12")
	}
	transfer := events.ChainFact{
		Kind: events.FactTRXTransfer, Network: network.Mainnet, TxID: strings.Repeat("ab", 32), BlockNum: 10,
		BlockID:   strings.Repeat("00", 7) + "0a" + strings.Repeat("cd", 24),
		BlockTime: events.Time(time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)),
		From:      "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", To: "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf", AmountSun: 5_000_000,
	}
	transfer.FactID = events.FactID(transfer.Kind, transfer.TxID, -1, transfer.BlockID)
	if err := s.Validate(instance(t, transfer)); err != nil {
		t.Fatalf("a trx_transfer fact fails its schema: %v", err)
	}
	m := map[string]any{}
	b, _ := json.Marshal(transfer)
	_ = json.Unmarshal(b, &m)
	m["kind"] = "mint"
	if err := s.Validate(instance(t, m)); err == nil {
		t.Fatal("schema accepted an unknown fact kind")
	}
}

func TestMarketSamplesMatchTheirSchema(t *testing.T) {
	s := compile(t, "marketsample.schema.json")
	p, e := events.Centisun(5025), int64(1_000_000)
	ok := events.MarketSample{SampleID: events.MarketSampleID(network.Nile, "simcheap", 5_000_000), Network: network.Nile,
		Slug: "simcheap", TS: events.Time(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)), PriceSun1h: &p, AvailableEnergy: &e}
	if err := s.Validate(instance(t, ok)); err != nil {
		t.Fatalf("a sample fails its schema: %v", err)
	}
	bad := ok
	bad.Slug = "Bad Slug"
	if err := s.Validate(instance(t, bad)); err == nil {
		t.Error("schema accepted an invalid slug")
	}
	m := map[string]any{}
	b, _ := json.Marshal(ok)
	_ = json.Unmarshal(b, &m)
	delete(m, "price_sun_1h")
	if err := s.Validate(instance(t, m)); err == nil {
		t.Error("schema accepted a sample without price_sun_1h (null must be explicit)")
	}
}
