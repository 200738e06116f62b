package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/schemas/eventschema"
	"rental/schemas/topics"
)

// KafkaOption changes what Kafka sets up.
type KafkaOption func(*kafkaConfig)

type kafkaConfig struct{ synthetic bool }

// SyntheticPayloads is for transport tests (the outbox relay, webhook delivery) that put
// hand-made envelopes with partial data on the public topics to exercise delivery, not
// payload shapes: their broker's records are not checked against the schemas.
func SyntheticPayloads(c *kafkaConfig) { c.synthetic = true }

// Kafka starts an embedded broker (franz-go kfake) for the test on a free 127.0.0.1 port,
// reached over TCP like any Kafka cluster, with every catalogue topic created; it returns
// the broker address. Each test gets its own broker, so topic names need no prefix.
//
// When the test ends, every record on the public topics (customer events, chain facts,
// market data, dead letters) is read back and checked against schemas/events with
// ValidateTopics; a record that breaks its schema, sits on the wrong topic or carries the
// wrong key fails the test. So every payload a test makes the stages emit is validated.
func Kafka(t testing.TB, opts ...KafkaOption) string {
	t.Helper()
	var cfg kafkaConfig
	for _, o := range opts {
		o(&cfg)
	}
	b, err := kafka.StartBroker(kafka.BrokerOptions{
		Addr:    "127.0.0.1:0",
		DataDir: t.TempDir(),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	cl, err := kafka.NewClient([]string{b.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, kadm.NewClient(cl), topics.All()); err != nil {
		t.Fatal(err)
	}
	if !cfg.synthetic {
		brokerAddr := b.Addr()
		t.Cleanup(func() { // runs before b.Close: cleanups run last-registered first
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			bad, err := ValidateTopics(ctx, brokerAddr)
			if err != nil {
				t.Errorf("schema check of the broker's records: %v", err)
			}
			for i, e := range bad {
				if i == 20 {
					t.Errorf("... and %d more records that break their schemas", len(bad)-i)
					break
				}
				t.Errorf("record breaks its schema: %v", e)
			}
		})
	}
	return b.Addr()
}

// DeadLettered reads topics.ConsumersDead on broker from the start until it holds at least
// n records or 20 s passed, and returns what it read: each record with its headers as a map.
func DeadLettered(t testing.TB, broker string, n int) []DeadRecord {
	t.Helper()
	cl, err := kafka.NewClient([]string{broker}, kgo.ConsumeTopics(topics.ConsumersDead.Name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []DeadRecord
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			out = append(out, DeadRecord{Key: string(r.Key), Value: string(r.Value), Headers: h})
		})
	}
	return out
}

// DeadRecord is a record read from the dead-letter topic.
type DeadRecord struct {
	Key, Value string
	Headers    map[string]string
}

// ValidateTopics reads every record on the public topics of the broker at addr, from the
// start to the end offsets of the moment of the call, and returns one error per record that
// fails eventschema.Set.Record. err is for a broker that could not be read.
func ValidateTopics(ctx context.Context, addr string) (bad []error, err error) {
	set, err := eventschema.Embedded()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, tp := range topics.All() {
		if eventschema.Public(tp.Name) {
			names = append(names, tp.Name)
		}
	}
	adm, err := kafka.NewClient([]string{addr})
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	start := map[string]map[int32]kgo.Offset{}
	end := map[string]map[int32]int64{}
	left := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			err = errors.Join(err, fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err))
			return
		}
		if o.Offset <= 0 {
			return
		}
		if start[o.Topic] == nil {
			start[o.Topic], end[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		start[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
		end[o.Topic][o.Partition] = o.Offset
		left++
	})
	if err != nil || left == 0 {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(start))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return bad, fmt.Errorf("read %d partitions to their end: %w", left, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, e error) {
			err = errors.Join(err, fmt.Errorf("%s/%d: %w", topic, p, e))
		})
		if err != nil {
			return bad, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			e, ok := end[r.Topic][r.Partition]
			if !ok || r.Offset >= e {
				return
			}
			if verr := set.Record(r.Topic, r.Key, r.Value); verr != nil {
				bad = append(bad, fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, verr))
			}
			if r.Offset == e-1 {
				delete(end[r.Topic], r.Partition)
				left--
			}
		})
	}
	return bad, nil
}
