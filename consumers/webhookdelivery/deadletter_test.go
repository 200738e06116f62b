package webhookdelivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/infra/testenv"
	"rental/infra/webhooks"
	"rental/schemas/topics"
)

// An event without a readable envelope, and an unreadable retry record, can never be
// delivered: each is written to the consumers' dead-letter topic with its source and the
// error, and the consumer moves on to the events behind it on the same partition.
func TestUnreadableRecordsAreDeadLetteredAndDeliveryMovesOn(t *testing.T) {
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/hook")
	const order = "ord_dead_1"
	ctx := context.Background()
	bad := []*kgo.Record{
		{Topic: topics.OrderEvents.Name, Key: []byte(order), Value: []byte(`{"event":"order.confirmed"`)},
		{Topic: topics.WebhookRetry[0].Name, Key: []byte(order), Value: []byte(`not a wake-up`)},
	}
	if err := e.prod.ProduceSync(ctx, bad...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	env := e.publish(t, "order.confirmed", map[string]any{"order_id": order, "tier": "1h"})
	e.start(t, scaled(100*time.Millisecond))

	waitFor(t, 30*time.Second, "the event behind the unreadable one delivered", func() bool {
		for _, r := range e.rcv.requests() {
			if r.EventID == env.EventID {
				return true
			}
		}
		return false
	})
	dead := testenv.DeadLettered(t, e.broker, 2)
	if len(dead) != 2 {
		t.Fatalf("%d dead-lettered records, want 2: %+v", len(dead), dead)
	}
	byTopic := map[string]testenv.DeadRecord{}
	for _, d := range dead {
		byTopic[d.Headers[kafka.HeaderDeadSourceTopic]] = d
		if d.Key != order || d.Headers[kafka.HeaderDeadSourcePartition] == "" || d.Headers[kafka.HeaderDeadSourceOffset] != "0" || d.Headers[kafka.HeaderDeadError] == "" {
			t.Errorf("dead-lettered %+v", d)
		}
	}
	if d := byTopic[topics.OrderEvents.Name]; d.Value != string(bad[0].Value) || d.Headers[kafka.HeaderDeadConsumer] != "webhooks" {
		t.Errorf("the unreadable event: %+v", d)
	}
	if d := byTopic[topics.WebhookRetry[0].Name]; d.Value != string(bad[1].Value) || d.Headers[kafka.HeaderDeadConsumer] != "webhooks.retry" {
		t.Errorf("the unreadable retry record: %+v", d)
	}
	if len(e.deadLetters(t)) != 0 {
		t.Error("an unreadable record went to the webhook dead-letter topic, which holds undeliverable events")
	}
}
