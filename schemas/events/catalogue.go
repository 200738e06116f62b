package events

import (
	"slices"
	"strings"
)

// The catalogue of customer event types: the only place an event type's name is written.
// It is the spec's "Event types" table (rental-api-v1); the webhook `events` filter
// (infra/webhooks.EventTypes) and the topic routing (schemas/topics.ForEvent) are derived
// from it, and the domain packages name their events through these constants
// (orders.EventConfirmed = EventOrderConfirmed, ...).
const (
	EventOrderConfirmed = "order.confirmed"
	EventOrderFailed    = "order.failed"
	EventOrderExpired   = "order.expired"
	EventOrderReclaimed = "order.reclaimed"
	EventOrderRefunded  = "order.refunded"

	EventBatchCompleted = "batch.completed"

	EventSubscriptionRefilled  = "subscription.refilled"
	EventSubscriptionSuspended = "subscription.suspended"
	EventSubscriptionPaused    = "subscription.paused"
	EventSubscriptionCharged   = "subscription.charged"

	EventBalanceCredited       = "balance.credited"
	EventBalanceLow            = "balance.low"
	EventDepositAddressRotated = "deposit_address.rotated"
)

// Aggregate is what a customer event is about. The events of one aggregate share a topic
// keyed by the aggregate's id (schemas/topics.ForEvent), so the events of one order, say,
// are read in the order they happened.
type Aggregate string

const (
	AggregateOrder        Aggregate = "order"        // keyed by order_id
	AggregateBatch        Aggregate = "batch"        // keyed by batch_id
	AggregateSubscription Aggregate = "subscription" // keyed by subscription_id
	AggregateAccount      Aggregate = "account"      // keyed by account_id
)

// Type is one customer event type and the aggregate it belongs to.
type Type struct {
	Name      string
	Aggregate Aggregate
}

// Family is the part of the name before the dot ("order" for order.confirmed).
func (t Type) Family() string { return family(t.Name) }

var catalogue = []Type{
	{EventOrderConfirmed, AggregateOrder},
	{EventOrderFailed, AggregateOrder},
	{EventOrderExpired, AggregateOrder},
	{EventOrderReclaimed, AggregateOrder},
	{EventOrderRefunded, AggregateOrder},
	{EventBatchCompleted, AggregateBatch},
	{EventSubscriptionRefilled, AggregateSubscription},
	{EventSubscriptionSuspended, AggregateSubscription},
	{EventSubscriptionPaused, AggregateSubscription},
	{EventSubscriptionCharged, AggregateSubscription},
	{EventBalanceCredited, AggregateAccount},
	{EventBalanceLow, AggregateAccount},
	{EventDepositAddressRotated, AggregateAccount},
}

// Catalogue returns every customer event type, in the spec's order.
func Catalogue() []Type { return slices.Clone(catalogue) }

// Lookup returns the catalogued type named name.
func Lookup(name string) (Type, bool) {
	i := slices.IndexFunc(catalogue, func(t Type) bool { return t.Name == name })
	if i < 0 {
		return Type{}, false
	}
	return catalogue[i], true
}

// AggregateOf returns the aggregate of an event type: the catalogue's for a catalogued
// type, otherwise that of the catalogued types of its family (an "order.x" event is about
// an order), so an event type travels with its family before the catalogue lists it.
// ok is false for a name of no known family.
func AggregateOf(name string) (Aggregate, bool) {
	if t, ok := Lookup(name); ok {
		return t.Aggregate, true
	}
	f := family(name)
	if f == "" {
		return "", false
	}
	for _, t := range catalogue {
		if t.Family() == f {
			return t.Aggregate, true
		}
	}
	return "", false
}

// family is the part of name before its first dot, or "" when name has no dot or nothing
// after it.
func family(name string) string {
	f, rest, ok := strings.Cut(name, ".")
	if !ok || f == "" || rest == "" {
		return ""
	}
	return f
}
