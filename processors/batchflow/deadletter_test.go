package batchflow

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/schemas/topics"
)

// An order event that is no envelope, or names no order, can never be resolved: the
// handler says so (the runner then dead-letters it and moves on) instead of skipping it.
func TestUnreadableOrderEventsAreDeadLettered(t *testing.T) {
	f := &Flow{}
	for _, v := range []string{`not json`, `{"event":"order.failed","event_id":"evt_1","data":{}}`} {
		err := f.HandleOrderEvent(context.Background(), &kgo.Record{Topic: topics.OrderEvents.Name, Value: []byte(v)})
		if !kafka.IsUnprocessable(err) {
			t.Errorf("%s: %v, want an unprocessable record", v, err)
		}
	}
}
