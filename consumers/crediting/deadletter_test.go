package crediting_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/consumers/crediting"
	"rental/infra/kafka"
	"rental/schemas/topics"
)

// A record on chain.facts.v1 that is not a chain fact can never become one: the handler
// says so (the runner then dead-letters it and moves on) instead of skipping it.
func TestRecordThatIsNoChainFactIsDeadLettered(t *testing.T) {
	err := (&crediting.Consumer{}).Handle(context.Background(), &kgo.Record{Topic: topics.ChainFacts.Name, Value: []byte(`{"kind":`)})
	if !kafka.IsUnprocessable(err) {
		t.Fatalf("%v, want an unprocessable record", err)
	}
}
