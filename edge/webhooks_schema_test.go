package edge

import (
	"encoding/json"
	"testing"

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
		data, ok := testEventData[typ]
		if !ok {
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
