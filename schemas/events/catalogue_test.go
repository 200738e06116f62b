package events_test

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"rental/schemas/events"
)

// Every event type is named once in the catalogue, with an aggregate, and in the spec's
// form family.name.
func TestEventCatalogueNamesEachTypeOnce(t *testing.T) {
	seen := map[string]bool{}
	all := events.Catalogue()
	if len(all) != 13 {
		t.Fatalf("%d event types, want the spec's 13", len(all))
	}
	for _, typ := range all {
		if seen[typ.Name] {
			t.Errorf("%s named twice", typ.Name)
		}
		seen[typ.Name] = true
		if typ.Aggregate == "" || typ.Family() == "" {
			t.Errorf("%s: aggregate %q, family %q", typ.Name, typ.Aggregate, typ.Family())
		}
		if got, ok := events.Lookup(typ.Name); !ok || got != typ {
			t.Errorf("Lookup(%s) = %v, %v", typ.Name, got, ok)
		}
	}
	all[0].Name = "changed"
	if events.Catalogue()[0].Name == "changed" {
		t.Error("Catalogue returned the catalogue itself, not a copy")
	}
}

// A type the catalogue does not list yet goes with its family; a name of no known family,
// or without a name after the dot, has no aggregate.
func TestEventCatalogueAggregateOf(t *testing.T) {
	for name, want := range map[string]events.Aggregate{
		events.EventOrderConfirmed:        events.AggregateOrder,
		events.EventBatchCompleted:        events.AggregateBatch,
		events.EventSubscriptionCharged:   events.AggregateSubscription,
		events.EventBalanceLow:            events.AggregateAccount,
		events.EventDepositAddressRotated: events.AggregateAccount,
		"order.updated":                   events.AggregateOrder,
		"deposit_address.retired":         events.AggregateAccount,
	} {
		if got, ok := events.AggregateOf(name); !ok || got != want {
			t.Errorf("AggregateOf(%s) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"mystery.happened", "order.", "order", ".confirmed", ""} {
		if got, ok := events.AggregateOf(name); ok {
			t.Errorf("AggregateOf(%q) = %q, want none", name, got)
		}
	}
}

// Each data schema shipped for data teams ("<type> data") describes a catalogued type.
func TestEventCatalogueCoversTheDataSchemas(t *testing.T) {
	files, err := fs.Glob(events.SchemaFiles, "*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for _, f := range files {
		raw, err := events.SchemaFiles.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Title string `json:"title"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name, ok := strings.CutSuffix(doc.Title, " data")
		if !ok {
			continue
		}
		n++
		if _, ok := events.Lookup(name); !ok {
			t.Errorf("%s describes %q, which the catalogue does not list", f, name)
		}
	}
	if n < 8 {
		t.Fatalf("only %d data schemas found", n)
	}
}
