package batches_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"rental/schemas/batches"
	"rental/schemas/events"
	"rental/schemas/orders"
)

func TestFinalStatus(t *testing.T) {
	cases := []struct {
		name   string
		states []batches.State
		want   batches.Status
	}{
		{"all completed", []batches.State{batches.StateCompleted, batches.StateCompleted}, batches.Completed},
		{"one partial delivery", []batches.State{batches.StateCompleted, batches.StatePartial}, batches.Partial},
		{"one unaffordable", []batches.State{batches.StateCompleted, batches.InsufficientFunds}, batches.Partial},
		{"delivered and cancelled", []batches.State{batches.StateCompleted, batches.StateCancelled}, batches.Partial},
		{"nothing delivered", []batches.State{batches.StateFailed, batches.InsufficientFunds}, batches.Failed},
		{"failed and cancelled", []batches.State{batches.StateFailed, batches.StateCancelled}, batches.Failed},
		{"all cancelled", []batches.State{batches.StateCancelled, batches.StateCancelled}, batches.Cancelled},
		{"one still placed", []batches.State{batches.StateCompleted, batches.Placed}, batches.Processing},
		{"one still pending", []batches.State{batches.Pending, batches.StateCancelled}, batches.Processing},
	}
	for _, c := range cases {
		var s batches.Summary
		for _, st := range c.states {
			s.Count(st)
		}
		if got := s.FinalStatus(); got != c.want {
			t.Errorf("%s: %s, want %s (summary %+v)", c.name, got, c.want, s)
		}
		if s.Total != len(c.states) {
			t.Errorf("%s: total %d", c.name, s.Total)
		}
	}
}

// A delivered order's outcome is fixed at confirmation: what happens to it later (expiry,
// reclaim, a support refund) is still a delivery; an order not yet confirmed has none.
func TestOrderOutcome(t *testing.T) {
	for _, st := range []orders.Status{orders.Confirmed, orders.Active, orders.Expired, orders.Reclaimed, orders.Refunded} {
		if got, ok := batches.OrderOutcome(st, false); !ok || got != batches.StateCompleted {
			t.Errorf("%s: %s %v", st, got, ok)
		}
		if got, ok := batches.OrderOutcome(st, true); !ok || got != batches.StatePartial {
			t.Errorf("%s partial: %s %v", st, got, ok)
		}
	}
	if got, ok := batches.OrderOutcome(orders.Failed, false); !ok || got != batches.StateFailed {
		t.Errorf("failed: %s %v", got, ok)
	}
	for _, st := range []orders.Status{orders.Created, orders.Paid, orders.Allocating, orders.Delegated} {
		if _, ok := batches.OrderOutcome(st, false); ok {
			t.Errorf("%s has an outcome", st)
		}
	}
}

// batch.completed's data matches its JSON Schema with exactly the spec's fields, and the
// schema refuses what a consumer could not rely on.
func TestCompletedDataMatchesItsSchema(t *testing.T) {
	raw, err := events.SchemaFiles.ReadFile("batchcompleted.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("batchcompleted.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("batchcompleted.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	d := batches.CompletedData{BatchID: "bat_0123456789abcdef01234567", ClientBatchID: "payroll-2026-11",
		Status: batches.Partial, Summary: batches.Summary{Total: 3, Completed: 2, InsufficientFunds: 1},
		ChargedAmountSun: 5_200_000, FinishedAt: events.Time(time.Date(2026, 11, 23, 20, 0, 0, 123e6, time.UTC))}
	b, _ := json.Marshal(d)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(m); err != nil {
		t.Fatalf("batch.completed data fails its schema: %v\n%s", err, b)
	}
	want := []string{"batch_id", "charged_amount_sun", "client_batch_id", "finished_at", "status", "summary"}
	if len(m) != len(want) {
		t.Fatalf("fields %v, want %v", m, want)
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("no %s in %s", k, b)
		}
	}
	if sum := m["summary"].(map[string]any); len(sum) != 6 {
		t.Errorf("summary %v, want the spec's six counters", sum)
	}
	bad := map[string]func(m map[string]any){
		"processing status": func(m map[string]any) { m["status"] = "processing" },
		"extra field":       func(m map[string]any) { m["receivers"] = []any{} },
		"no summary":        func(m map[string]any) { delete(m, "summary") },
		"time without ms":   func(m map[string]any) { m["finished_at"] = "2026-11-23T20:00:00Z" },
	}
	for name, mutate := range bad {
		var v map[string]any
		_ = json.Unmarshal(b, &v)
		mutate(v)
		if err := s.Validate(v); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
