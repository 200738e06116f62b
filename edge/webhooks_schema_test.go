package edge

import (
	"encoding/json"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"rental/infra/webhooks"
	"rental/schemas/events"
	"rental/schemas/eventschema"
	"rental/schemas/network"
)

// What POST /v1/webhooks/{id}/test delivers is a webhook like any other: its envelope and
// data pass the event's JSON Schema for every type an endpoint can ask for.
func TestWebhookTestDeliveriesMatchTheEventSchemas(t *testing.T) {
	set, err := eventschema.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range webhooks.EventTypes() {
		data := events.SampleData(typ)
		if data == nil {
			t.Errorf("%s: no sample", typ)
			continue
		}
		env, err := events.New(typ, "acc_1", network.Nile, data)
		if err != nil {
			t.Fatal(err)
		}
		env.Test = true
		raw, _ := json.Marshal(env)
		if _, err := set.Envelope(raw); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

// Every delivery a receiver can get validates against the OpenAPI document's `webhooks`:
// the entry of its event type exists and its request body schema accepts the test
// delivery of that type, and a body of another type is refused by it.
func TestWebhookDeliveriesMatchTheOpenAPIWebhooks(t *testing.T) {
	c := theContract(t)
	schemaOf := func(typ string) *openapi3.Schema {
		item := c.doc.Webhooks[typ]
		if item == nil || item.Post == nil || item.Post.RequestBody == nil {
			t.Fatalf("the document has no webhooks entry POSTing %s", typ)
		}
		return item.Post.RequestBody.Value.Content.Get("application/json").Schema.Value
	}
	for _, typ := range webhooks.EventTypes() {
		env, err := events.New(typ, "acc_0123456789abcdef01234567", network.Nile, events.SampleData(typ))
		if err != nil {
			t.Fatal(err)
		}
		env.Test = true
		raw, _ := json.Marshal(env)
		var v any
		_ = json.Unmarshal(raw, &v)
		if err := schemaOf(typ).VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s: the delivery does not match the document's webhook: %v", typ, err)
		}
		other := events.EventBalanceLow
		if typ == other {
			other = events.EventOrderConfirmed
		}
		if err := schemaOf(other).VisitJSON(v, openapi3.EnableJSONSchema2020()); err == nil {
			t.Errorf("a %s delivery passed the %s webhook's schema", typ, other)
		}
	}
	if len(c.doc.Webhooks) != len(webhooks.EventTypes()) {
		t.Errorf("the document has %d webhooks, the catalogue %d event types", len(c.doc.Webhooks), len(webhooks.EventTypes()))
	}
}
