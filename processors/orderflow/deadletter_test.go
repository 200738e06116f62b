package orderflow

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/infra/testenv"
	"rental/schemas/network"
	"rental/schemas/topics"
)

// An intent without an order id and a record on chain.facts.v1 that is not a chain fact
// can never be processed: each is written to the consumers' dead-letter topic with its
// source and the error, and the processor commits past it to the records behind it.
func TestMalformedRecordsAreDeadLetteredAndTheProcessorMovesOn(t *testing.T) {
	// The malformed records are the point of this test: the schema check is off.
	e := newEnvBroker(t, network.Mainnet, nil, testenv.Kafka(t, testenv.SyntheticPayloads))
	cl, err := kafka.NewClient([]string{e.brokers})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const key = "ord_dead_letter_test"
	res := cl.ProduceSync(ctx,
		&kgo.Record{Topic: topics.OrderIntents.Name, Key: []byte(key), Value: []byte(`{"kind":"process"}`)},
		&kgo.Record{Topic: topics.OrderIntents.Name, Key: []byte(key), Value: []byte(`{"order_id":"ord_unknown","kind":"process"}`)},
		&kgo.Record{Topic: topics.ChainFacts.Name, Key: []byte(key), Value: []byte(`not a fact`)},
	)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	intentPart, intentNext := res[1].Record.Partition, res[1].Record.Offset+1
	e.startFlow()

	dead := testenv.DeadLettered(t, e.brokers, 2)
	if len(dead) != 2 {
		t.Fatalf("%d dead-lettered records, want 2: %+v", len(dead), dead)
	}
	want := map[string]struct{ value, consumer string }{
		topics.OrderIntents.Name: {`{"kind":"process"}`, "orderflow.intents"},
		topics.ChainFacts.Name:   {`not a fact`, "orderflow.chain"},
	}
	for _, d := range dead {
		w, ok := want[d.Headers[kafka.HeaderDeadSourceTopic]]
		if !ok || d.Value != w.value || d.Key != key || d.Headers[kafka.HeaderDeadConsumer] != w.consumer ||
			d.Headers[kafka.HeaderDeadSourceOffset] == "" || d.Headers[kafka.HeaderDeadSourcePartition] == "" || d.Headers[kafka.HeaderDeadError] == "" {
			t.Errorf("dead-lettered %+v", d)
		}
		delete(want, d.Headers[kafka.HeaderDeadSourceTopic])
	}

	// The intent behind the malformed one was processed: the group committed past both.
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(20 * time.Second)
	for {
		offs, err := adm.FetchOffsets(ctx, "orderflow.intents")
		if err == nil {
			if o, ok := offs.Lookup(topics.OrderIntents.Name, intentPart); ok && o.At >= intentNext {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("orderflow.intents never committed past offset %d of partition %d (%v)", intentNext-1, intentPart, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
