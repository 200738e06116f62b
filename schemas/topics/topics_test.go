package topics_test

import (
	"testing"

	"rental/schemas/events"
	"rental/schemas/topics"
)

// Every catalogued event type routes to the event topic keyed by its aggregate's id.
func TestEventTopicForEveryCatalogueType(t *testing.T) {
	key := map[events.Aggregate]string{
		events.AggregateOrder: "order_id", events.AggregateBatch: "batch_id",
		events.AggregateSubscription: "subscription_id", events.AggregateAccount: "account_id",
	}
	for _, typ := range events.Catalogue() {
		topic, ok := topics.ForEvent(typ.Name)
		if !ok {
			t.Errorf("%s has no topic", typ.Name)
			continue
		}
		if topic.Key != key[typ.Aggregate] {
			t.Errorf("%s (%s) routes to %s keyed by %s", typ.Name, typ.Aggregate, topic.Name, topic.Key)
		}
	}
	for name, want := range map[string]topics.Topic{
		events.EventOrderConfirmed:        topics.OrderEvents,
		events.EventBatchCompleted:        topics.BatchEvents,
		events.EventSubscriptionRefilled:  topics.SubscriptionEvents,
		events.EventBalanceCredited:       topics.AccountEvents,
		events.EventDepositAddressRotated: topics.AccountEvents,
		"order.updated":                   topics.OrderEvents, // not catalogued: routed with its family
	} {
		if got, ok := topics.ForEvent(name); !ok || got.Name != want.Name {
			t.Errorf("ForEvent(%s) = %s, %v; want %s", name, got.Name, ok, want.Name)
		}
	}
	for _, name := range []string{"mystery.happened", "order.", "order"} {
		if got, ok := topics.ForEvent(name); ok {
			t.Errorf("ForEvent(%q) = %s, want none", name, got.Name)
		}
	}
}

// Topic names are unique across the catalogue.
func TestTopicNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, topic := range topics.All() {
		if seen[topic.Name] {
			t.Errorf("%s listed twice", topic.Name)
		}
		seen[topic.Name] = true
		if topic.Doc == "" || topic.Partitions <= 0 {
			t.Errorf("%s: doc %q, %d partitions", topic.Name, topic.Doc, topic.Partitions)
		}
	}
}
