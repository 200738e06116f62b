// Package topics is the Kafka topic catalogue: the single source of truth for every topic's
// name, key, partition count, retention and cleanup policy. Stages create topics from it at
// start (idempotently) and never name a topic by a string literal elsewhere.
package topics

import (
	"fmt"
	"time"

	"rental/schemas/events"
)

// Cleanup is the topic's cleanup.policy.
type Cleanup string

const (
	Delete  Cleanup = "delete"
	Compact Cleanup = "compact"
)

// Topic describes one topic.
type Topic struct {
	Name       string
	Key        string // what the record key is; it fixes the ordering guarantee
	Partitions int32
	Retention  time.Duration // 0 with Compact means keep the latest value per key forever
	Cleanup    Cleanup
	Doc        string
}

// Configs returns the topic-level configs for CreateTopics.
func (t Topic) Configs() map[string]*string {
	s := func(v string) *string { return &v }
	c := map[string]*string{"cleanup.policy": s(string(t.Cleanup))}
	if t.Retention > 0 {
		c["retention.ms"] = s(fmt.Sprint(t.Retention.Milliseconds()))
	} else {
		c["retention.ms"] = s("-1")
	}
	return c
}

const day = 24 * time.Hour

// The catalogue. Partition counts bound how far a consumer group can scale out; 12 lets a
// group grow to 12 replicas with one partition each.
var (
	// ChainFacts carries normalized facts read from confirmed blocks: TRX transfers, TRC-20
	// Transfer logs, results of tracked transactions, and reverts after a fork. Keyed by
	// transaction id, so a fact and its revert land on the same partition in order.
	ChainFacts = Topic{Name: "chain.facts.v1", Key: "tx_id", Partitions: 12, Retention: 7 * day, Cleanup: Delete,
		Doc: "Normalized chain facts (schemas/events/chainfact.schema.json)."}

	// OrderEvents carries the customer events of orders (order.*), keyed by order id so that
	// the events of one order are read in the order they happened.
	OrderEvents = Topic{Name: "events.orders.v1", Key: "order_id", Partitions: 12, Retention: 30 * day, Cleanup: Delete,
		Doc: "Customer events order.* in the spec envelope."}

	// AccountEvents carries account-level customer events (balance.*, deposit_address.*),
	// keyed by account id.
	AccountEvents = Topic{Name: "events.accounts.v1", Key: "account_id", Partitions: 12, Retention: 30 * day, Cleanup: Delete,
		Doc: "Customer events balance.* and deposit_address.* in the spec envelope."}

	// SubscriptionEvents carries subscription.* customer events, keyed by subscription id.
	SubscriptionEvents = Topic{Name: "events.subscriptions.v1", Key: "subscription_id", Partitions: 12, Retention: 30 * day, Cleanup: Delete,
		Doc: "Customer events subscription.* in the spec envelope."}

	// BatchEvents carries batch.completed, keyed by batch id.
	BatchEvents = Topic{Name: "events.batches.v1", Key: "batch_id", Partitions: 6, Retention: 30 * day, Cleanup: Delete,
		Doc: "Customer events batch.* in the spec envelope."}

	// MarketData carries the pricer's snapshot: price table, order books and the rules behind
	// them (schemas/events/marketdata.schema.json). Compacted with the single key "snapshot"
	// (events.MarketDataKey), so the topic holds the latest snapshot and a new reader gets the
	// current prices by reading one record; one partition is enough for one key. It is a derived
	// cache recomputed every few seconds, not a money fact, so the pricer produces it directly
	// rather than through the outbox.
	MarketData = Topic{Name: "market.data.v1", Key: "snapshot", Partitions: 1, Retention: 0, Cleanup: Compact,
		Doc: "Latest pricing snapshot (schemas/events/marketdata.schema.json)."}

	// MarketSamples carries every price sample the market sampler takes of a provider
	// (processors/marketwatch; schemas/events/marketsample.schema.json), keyed by provider slug
	// so one provider's samples are read in order. Written through the outbox with the sample's
	// row: a record exists exactly when the stored sample does. A product topic for data teams.
	MarketSamples = Topic{Name: "market.samples.v1", Key: "slug", Partitions: 3, Retention: 30 * day, Cleanup: Delete,
		Doc: "Market price samples of the providers on GET /v1/market (schemas/events/marketsample.schema.json)."}

	// OrderIntents carries the internal work items of the order pipeline (created by the
	// edge with the order, a reclaim request), keyed by order id so one
	// processor replica handles an order's steps in order. Internal: not a product topic.
	OrderIntents = Topic{Name: "orders.intents.v1", Key: "order_id", Partitions: 12, Retention: 7 * day, Cleanup: Delete,
		Doc: "Internal order work items (processors/orderflow)."}
)

// Webhook delivery retries (consumers/webhookdelivery). One delay topic per step of the spec's retry
// schedule: a record in WebhookRetry[i] is a wake-up for attempt i+2 of one delivery and
// carries its due time; the consumer pauses a partition until its head record is due, so a
// topic holds records of one delay only and its head is always the earliest due. Keyed like
// the event topics (order id for order events) so the wake-ups of one order share a
// partition. The delays themselves are configuration (WEBHOOK_RETRY_DELAYS); the names only
// number the steps. Retention covers the longest nominal step (6 h) with room for an outage.
var WebhookRetry = func() []Topic {
	nominal := []string{"15s", "30s", "3m", "10m", "20m", "30m", "1h", "3h", "6h"}
	out := make([]Topic, len(nominal))
	for i, d := range nominal {
		out[i] = Topic{Name: fmt.Sprintf("webhooks.retry.%d.v1", i+1), Key: "ordering key", Partitions: 12,
			Retention: 3 * day, Cleanup: Delete,
			Doc: fmt.Sprintf("Webhook retry wake-ups before attempt %d (nominally %s after attempt %d).", i+2, d, i+1)}
	}
	return out
}()

// WebhookDead receives deliveries whose every attempt on every endpoint failed: the
// envelope as it was sent, with headers naming the endpoint role and attempts.
var WebhookDead = Topic{Name: "webhooks.dead.v1", Key: "ordering key", Partitions: 12, Retention: 30 * day, Cleanup: Delete,
	Doc: "Dead-lettered webhook deliveries (consumers/webhookdelivery)."}

// ConsumersDead receives the records a consumer can never process (an intent without an
// order id, an event without a readable envelope): the record as it was read, with its own
// headers and headers naming its source topic, partition and offset, the consumer group and
// the error (infra/kafka.DeadLetters). A consumer commits past such a record only once it is
// here; an operator inspects and replays from here.
var ConsumersDead = Topic{Name: "consumers.dead.v1", Key: "the source record's key", Partitions: 3, Retention: 30 * day, Cleanup: Delete,
	Doc: "Records a consumer can never process, with their source and the error (infra/kafka.DeadLetters)."}

// All lists every topic the service uses; stages create them at start.
func All() []Topic {
	all := []Topic{ChainFacts, OrderEvents, AccountEvents, SubscriptionEvents, BatchEvents, MarketData, MarketSamples, OrderIntents}
	all = append(all, WebhookRetry...)
	return append(all, WebhookDead, ConsumersDead)
}

// aggregateTopics is the topic of each aggregate's customer events: keyed by the
// aggregate's id, so one order's (batch's, subscription's, account's) events stay in order.
var aggregateTopics = map[events.Aggregate]Topic{
	events.AggregateOrder:        OrderEvents,
	events.AggregateAccount:      AccountEvents,
	events.AggregateSubscription: SubscriptionEvents,
	events.AggregateBatch:        BatchEvents,
}

// ForEvent routes a customer event type to its topic: the topic of its aggregate in the
// event catalogue (events.AggregateOf; a type not catalogued yet goes with its family).
// ok is false for an unknown type.
func ForEvent(eventType string) (Topic, bool) {
	a, ok := events.AggregateOf(eventType)
	if !ok {
		return Topic{}, false
	}
	t, ok := aggregateTopics[a]
	return t, ok
}
