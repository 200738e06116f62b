// Package kafka is the Kafka adapter every stage shares: client options, idempotent topic
// creation from the catalogue in rental/schemas/topics, an embedded broker for the dev stack
// and tests (franz-go's kfake with a data directory), and a per-partition consumer runner
// that commits only what its handler processed or dead-lettered (deadletter.go: the one rule
// for records that can never be processed).
package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/schemas/topics"
)

// ClientOpts returns the options every client of the service starts from: the seed
// brokers, acks from all in-sync replicas and timeouts that surface a dead cluster in
// seconds rather than hang. The producer is idempotent (franz-go's default, kept on
// deliberately: the outbox relay's per-key order relies on it). extra options are
// appended, so they win.
func ClientOpts(brokers []string, extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DialTimeout(5 * time.Second),
		kgo.RequestTimeoutOverhead(10 * time.Second),
		kgo.RetryTimeout(30 * time.Second),
		// A record that cannot be delivered within this bound fails instead of blocking
		// its producer forever; the outbox relay then retries the whole batch.
		kgo.RecordDeliveryTimeout(30 * time.Second),
		kgo.ProducerLinger(2 * time.Millisecond),
	}
	return append(opts, extra...)
}

// NewClient builds a client from ClientOpts.
func NewClient(brokers []string, extra ...kgo.Opt) (*kgo.Client, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka: no brokers configured (KAFKA_BROKERS)")
	}
	cl, err := kgo.NewClient(ClientOpts(brokers, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return cl, nil
}

// EnsureTopics creates every given topic with its partition count and configs. A topic
// that already exists is left as it is (partition counts are never changed here: doing so
// would move keys between partitions and break per-key order). Any other failure is
// returned, naming the topics it concerns.
func EnsureTopics(ctx context.Context, adm *kadm.Client, ts []topics.Topic) error {
	var failed []string
	for _, t := range ts {
		// One request per topic because configs differ between topics.
		resp, err := adm.CreateTopic(ctx, t.Partitions, -1, t.Configs(), t.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			failed = append(failed, fmt.Sprintf("%s: %v", t.Name, err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("kafka: creating topics: %s", strings.Join(failed, "; "))
	}
	return nil
}
