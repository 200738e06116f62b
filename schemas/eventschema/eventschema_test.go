package eventschema_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"rental/schemas/batches"
	"rental/schemas/events"
	"rental/schemas/eventschema"
	"rental/schemas/network"
	"rental/schemas/orders"
	"rental/schemas/topics"
)

func ptr[T any](v T) *T { return &v }

var (
	hash     = strings.Repeat("ab", 32)
	receiver = "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"
	at       = events.Time(time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC))
)

// One payload per event type, built from the Go types the stages emit.
func samples() map[string]any {
	orderID, tier := events.NewID("ord"), ptr("1h")
	return map[string]any{
		orders.EventConfirmed: orders.ConfirmedData{OrderID: orderID, ClientOrderID: "c-1", Resource: orders.Energy, Amount: 65_000,
			DeliveredAmount: 65_000, Tier: tier, DurationSeconds: ptr(int64(3600)), Receiver: receiver, DelegateHash: &hash,
			DelegateHashes: []string{hash}, DelegatedAt: &at, ExpiresAt: &at, TotalAmountSun: 4_000_000,
			Activation: orders.ActivationInfo{}},
		orders.EventFailed: orders.FailedData{OrderID: orderID, ClientOrderID: "c-1", Receiver: receiver, Resource: orders.Energy,
			Amount: 65_000, Tier: tier, Failure: orders.Failure{Code: 4001, Slug: "insufficient_supply", Message: "m"},
			ChargedAmountSun: 4_000_000, RefundedAmountSun: 4_000_000, RefundComplete: true},
		orders.EventExpired: orders.EndedData{OrderID: orderID, ClientOrderID: "c-1", Receiver: receiver, Resource: orders.Energy,
			Amount: 65_000, Tier: tier, ReclaimHash: &hash, ExpiredAt: &at},
		orders.EventReclaimed: orders.EndedData{OrderID: orderID, ClientOrderID: "c-1", Receiver: receiver, Resource: orders.Energy,
			Amount: 65_000, Tier: tier, ReclaimHash: &hash, ReclaimedAt: &at},
		orders.EventRefunded: orders.RefundedData{OrderID: orderID, ClientOrderID: "c-1", Receiver: receiver, Resource: orders.Energy,
			Amount: 65_000, Tier: tier, DeliveredAmount: 65_000, Reason: "support_adjustment", ChargedAmountSun: 4_000_000,
			RefundedAmountSun: 4_000_000, RefundComplete: true, RefundedAt: at},
		batches.EventCompleted: batches.CompletedData{BatchID: events.NewID("bat"), ClientBatchID: "b-1", Status: "partial",
			Summary: batches.Summary{Total: 2, Completed: 1, Failed: 1}, ChargedAmountSun: 1, FinishedAt: at},
		events.EventSubscriptionRefilled: events.SubscriptionRefilled{SubscriptionID: events.NewID("sub"), OrderID: orderID,
			Receiver: receiver, Resource: "energy", Amount: 65_000, Tier: "1h", TriggerAvailable: 10, ThresholdAmount: 30_000,
			TotalAmountSun: 1, RefillsToday: 1},
		events.EventSubscriptionSuspended: events.SubscriptionSuspended{SubscriptionID: events.NewID("sub"), Receiver: receiver,
			Reason: "insufficient_funds", RequiredSun: ptr(int64(5)), AvailableSun: ptr(int64(1))},
		events.EventSubscriptionPaused: events.SubscriptionPaused{SubscriptionID: events.NewID("sub"), Receiver: receiver, Reason: "user"},
		events.EventSubscriptionCharged: events.SubscriptionCharged{SubscriptionID: events.NewID("sub"), Receiver: receiver,
			Plan: "basic", AmountSun: 1, NextBillingAt: at},
		events.EventBalanceCredited: events.BalanceCredited{Reason: "deposit", Currency: "TRX", AmountSun: 5, TxHash: &hash, TxID: &hash,
			ReferenceID: ptr("dep_1"), Asset: "TRX", Sender: &receiver, BlockNumber: ptr(int64(3))},
		events.EventBalanceLow:            events.BalanceLow{BalanceSun: 1, ThresholdSun: 10, EstimatedOrdersRemaining: 0},
		events.EventDepositAddressRotated: events.DepositAddressRotated{Address: receiver, RotatedAt: at},
	}
}

func envelope(t *testing.T, eventType string, data any) []byte {
	t.Helper()
	env, err := events.New(eventType, "acc_1", network.Nile, data)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func set(t *testing.T) *eventschema.Set {
	t.Helper()
	s, err := eventschema.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every customer event type has a data schema, the envelope dispatches to it, and the
// payloads the Go types produce validate.
func TestEveryEventTypeHasASchemaAndItsPayloadValidates(t *testing.T) {
	s := set(t)
	for typ, data := range samples() {
		if !s.HasEventSchema(typ) {
			t.Errorf("%s: no %s", typ, eventschema.FileFor(typ))
			continue
		}
		if _, ok := topics.ForEvent(typ); !ok {
			t.Errorf("%s: no topic", typ)
		}
		if _, err := s.Envelope(envelope(t, typ, data)); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
	if len(samples()) != 13 {
		t.Fatalf("%d event types, the spec's table has 13", len(samples()))
	}
}

// A payload that breaks its event's schema fails through the envelope, so validating the
// envelope is enough to validate the data.
func TestEnvelopeDispatchRejectsAWrongPayload(t *testing.T) {
	s := set(t)
	for typ, data := range samples() {
		var m map[string]any
		b, _ := json.Marshal(data)
		_ = json.Unmarshal(b, &m)
		for field := range m {
			delete(m, field) // every field of every event is required
			break
		}
		if _, err := s.Envelope(envelope(t, typ, m)); err == nil {
			t.Errorf("%s without a field: accepted", typ)
		}
	}
	wrong := map[string]func(m map[string]any){
		"amount as a string":      func(m map[string]any) { m["amount"] = "65000" },
		"unknown resource":        func(m map[string]any) { m["resource"] = "cpu" },
		"hash not hex":            func(m map[string]any) { m["delegate_hashes"] = []any{"xyz"} },
		"activation without hash": func(m map[string]any) { delete(m["activation"].(map[string]any), "hash") },
		"time without ms":         func(m map[string]any) { m["delegated_at"] = "2026-01-02T03:04:05Z" },
	}
	for name, mutate := range wrong {
		var m map[string]any
		b, _ := json.Marshal(samples()[orders.EventConfirmed])
		_ = json.Unmarshal(b, &m)
		mutate(m)
		if _, err := s.Envelope(envelope(t, orders.EventConfirmed, m)); err == nil {
			t.Errorf("order.confirmed with %s: accepted", name)
		}
	}
	// Additive fields pass: consumers ignore unknown fields.
	var m map[string]any
	b, _ := json.Marshal(samples()[orders.EventConfirmed])
	_ = json.Unmarshal(b, &m)
	m["new_field"] = 1
	if _, err := s.Envelope(envelope(t, orders.EventConfirmed, m)); err != nil {
		t.Errorf("an additive field was refused: %v", err)
	}
	// An event the service would emit without a schema is refused.
	if _, err := s.Envelope(envelope(t, "order.updated", map[string]any{"order_id": "ord_1"})); err == nil {
		t.Error("an event type without a schema was accepted")
	}
}

// Record checks a topic's records: the value's schema, the event's topic, the key.
func TestRecordChecksTopicKeyAndValue(t *testing.T) {
	s := set(t)
	sm := samples()
	confirmed := envelope(t, orders.EventConfirmed, sm[orders.EventConfirmed])
	orderID := sm[orders.EventConfirmed].(orders.ConfirmedData).OrderID
	credited := envelope(t, events.EventBalanceCredited, sm[events.EventBalanceCredited])
	fact := events.ChainFact{Kind: events.FactTRXTransfer, Network: network.Nile, TxID: hash, BlockNum: 10, BlockID: hash,
		BlockTime: at, From: receiver, To: receiver, AmountSun: 1}
	fact.FactID = events.FactID(fact.Kind, fact.TxID, -1, fact.BlockID)
	factJSON, _ := json.Marshal(fact)

	ok := []struct {
		topic, key string
		value      []byte
	}{
		{topics.OrderEvents.Name, orderID, confirmed},
		{topics.AccountEvents.Name, "acc_1", credited},
		{topics.ChainFacts.Name, hash, factJSON},
		{topics.WebhookDead.Name, "anything", confirmed},
		{topics.OrderIntents.Name, "x", []byte("internal, not checked")},
	}
	for _, c := range ok {
		if err := s.Record(c.topic, []byte(c.key), c.value); err != nil {
			t.Errorf("%s: %v", c.topic, err)
		}
	}
	bad := map[string]struct {
		topic, key string
		value      []byte
	}{
		"order event on the accounts topic": {topics.AccountEvents.Name, "acc_1", confirmed},
		"order event keyed by account":      {topics.OrderEvents.Name, "acc_1", confirmed},
		"fact keyed by block":               {topics.ChainFacts.Name, "x", factJSON},
		"not JSON":                          {topics.OrderEvents.Name, orderID, []byte("{")},
		"market data not a snapshot":        {topics.MarketData.Name, events.MarketDataKey, []byte(`{"version":1}`)},
	}
	for name, c := range bad {
		if err := s.Record(c.topic, []byte(c.key), c.value); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
