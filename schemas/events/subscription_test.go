package events_test

import (
	"encoding/json"
	"testing"
	"time"

	"rental/schemas/events"
)

// The subscription payloads validate against their JSON Schema files, carry exactly the
// spec's data fields, and the schemas refuse what would break Semantics 7.
func TestSubscriptionPayloadsMatchTheirSchemas(t *testing.T) {
	const sub, ord, addr = "sub_0123456789abcdef01234567", "ord_0123456789abcdef01234567", "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
	cases := []struct {
		schema string
		v      any
		fields int
	}{
		{"subscriptionrefilled.schema.json", events.SubscriptionRefilled{SubscriptionID: sub, OrderID: ord, Receiver: addr, Resource: "energy",
			Amount: 65_000, Tier: "1h", TriggerAvailable: 1_200, ThresholdAmount: 30_000, TotalAmountSun: 3_900_000, RefillsToday: 1}, 10},
		{"subscriptionsuspended.schema.json", events.SubscriptionSuspended{SubscriptionID: sub, Receiver: addr, Reason: "insufficient_funds",
			RequiredSun: ptr(int64(3_900_000)), AvailableSun: ptr(int64(12))}, 5},
		{"subscriptionsuspended.schema.json", events.SubscriptionSuspended{SubscriptionID: sub, Receiver: addr, Reason: "daily_limit_reached"}, 5},
		{"subscriptionpaused.schema.json", events.SubscriptionPaused{SubscriptionID: sub, Receiver: addr, Reason: "reserve_exhausted"}, 3},
		{"subscriptioncharged.schema.json", events.SubscriptionCharged{SubscriptionID: sub, Receiver: addr, Plan: "basic", AmountSun: 6_000_000,
			NextBillingAt: events.Time(time.Now())}, 5},
	}
	for _, c := range cases {
		if err := compile(t, c.schema).Validate(instance(t, c.v)); err != nil {
			t.Errorf("%s %+v: %v", c.schema, c.v, err)
		}
		b, _ := json.Marshal(c.v)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if len(m) != c.fields {
			t.Errorf("%s: %d fields, want the spec's %d: %s", c.schema, len(m), c.fields, b)
		}
	}
	bad := map[string]struct {
		schema string
		v      any
	}{
		"funds without amounts":  {"subscriptionsuspended.schema.json", events.SubscriptionSuspended{SubscriptionID: sub, Receiver: addr, Reason: "insufficient_funds"}},
		"unknown suspend reason": {"subscriptionsuspended.schema.json", events.SubscriptionSuspended{SubscriptionID: sub, Receiver: addr, Reason: "user"}},
		"unknown pause reason":   {"subscriptionpaused.schema.json", events.SubscriptionPaused{SubscriptionID: sub, Receiver: addr, Reason: "daily_limit_reached"}},
		"refill of nothing":      {"subscriptionrefilled.schema.json", events.SubscriptionRefilled{SubscriptionID: sub, OrderID: ord, Receiver: addr, Resource: "energy", Tier: "1h", RefillsToday: 1}},
	}
	for name, c := range bad {
		if err := compile(t, c.schema).Validate(instance(t, c.v)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
