// Package webhooks is the platform side of webhook delivery: the endpoint store (secrets
// encrypted at rest), the delivery queue and history in Postgres, the event-type
// catalogue endpoints subscribe to, and the SSRF-safe HTTP client every delivery and test
// call goes through. Transport (edge/webhooks.go) and the delivery consumer
// (consumers/webhookdelivery) build on it.
package webhooks

import (
	"slices"

	"rental/schemas/events"
)

// eventTypes is every customer event type of rental-api-v1 ("Event types"): the event
// catalogue (schemas/events), the vocabulary an endpoint's `events` filter is validated
// against. An endpoint registered without an events list receives types the catalogue
// gains later without re-registration (its filter is stored as "all", not as this list).
var eventTypes = func() []string {
	var names []string
	for _, t := range events.Catalogue() {
		names = append(names, t.Name)
	}
	return names
}()

// EventTypes returns a copy of the catalogue.
func EventTypes() []string { return slices.Clone(eventTypes) }

// KnownEventType reports whether t is in the catalogue.
func KnownEventType(t string) bool { return slices.Contains(eventTypes, t) }
