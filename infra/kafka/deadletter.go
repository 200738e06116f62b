package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/metrics"
	"rental/schemas/topics"
)

// The rule for a record that can never be processed (a value that is not what the topic
// carries, an intent without an order id): it is dead-lettered to topics.ConsumersDead and
// only then committed past, and counted in rental_consumer_dead_lettered_total{consumer}.
// It is never logged and skipped, and never retried forever. A Runner handler says so by
// returning Unprocessable(err); a consumer of its own calls DeadLetters.Write and moves on
// only when that returned nil.

// Headers a dead-lettered record carries besides its own.
const (
	HeaderDeadSourceTopic     = "source_topic"
	HeaderDeadSourcePartition = "source_partition"
	HeaderDeadSourceOffset    = "source_offset"
	HeaderDeadConsumer        = "consumer" // the consumer group that gave up on it
	HeaderDeadError           = "error"
)

// unprocessableError marks a handler error as permanent: retrying cannot help.
type unprocessableError struct{ err error }

func (u *unprocessableError) Error() string { return "record can never be processed: " + u.err.Error() }
func (u *unprocessableError) Unwrap() error { return u.err }

// Unprocessable marks err as saying that the record can never be processed. A Runner whose
// handler returns it dead-letters the record and moves past it.
func Unprocessable(err error) error {
	if err == nil {
		err = errors.New("unprocessable record")
	}
	return &unprocessableError{err}
}

// IsUnprocessable reports whether err (or an error it wraps) came from Unprocessable.
func IsUnprocessable(err error) bool {
	var u *unprocessableError
	return errors.As(err, &u)
}

// DeadLetters writes the records one consumer gives up on to topics.ConsumersDead.
type DeadLetters struct {
	consumer string
	count    prometheus.Counter
}

// NewDeadLetters is the dead-letter writer of consumer (its group name), counting in
// rental_consumer_dead_lettered_total{consumer} on reg (nil: the default registerer).
func NewDeadLetters(consumer string, reg prometheus.Registerer) *DeadLetters {
	vec := metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rental_consumer_dead_lettered_total",
		Help: "Records a consumer could never process, written to " + topics.ConsumersDead.Name + " and committed past, by consumer group.",
	}, []string{"consumer"}))
	return &DeadLetters{consumer: consumer, count: vec.WithLabelValues(consumer)}
}

// Write produces rec (key, value and headers as read) to topics.ConsumersDead through cl,
// adding the headers that name its source and cause, and waits for the broker's
// acknowledgement. It returns nil only once the record is stored there: the caller commits
// past rec only then, and retries on an error.
func (d *DeadLetters) Write(ctx context.Context, cl *kgo.Client, rec *kgo.Record, cause error) error {
	msg := "unprocessable record"
	if cause != nil {
		msg = cause.Error()
	}
	dead := &kgo.Record{Topic: topics.ConsumersDead.Name, Key: rec.Key, Value: rec.Value,
		Headers: append(append([]kgo.RecordHeader(nil), rec.Headers...),
			kgo.RecordHeader{Key: HeaderDeadSourceTopic, Value: []byte(rec.Topic)},
			kgo.RecordHeader{Key: HeaderDeadSourcePartition, Value: []byte(strconv.FormatInt(int64(rec.Partition), 10))},
			kgo.RecordHeader{Key: HeaderDeadSourceOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
			kgo.RecordHeader{Key: HeaderDeadConsumer, Value: []byte(d.consumer)},
			kgo.RecordHeader{Key: HeaderDeadError, Value: []byte(msg)},
		)}
	if err := cl.ProduceSync(ctx, dead).FirstErr(); err != nil {
		return fmt.Errorf("kafka: dead-letter %s[%d]@%d to %s: %w", rec.Topic, rec.Partition, rec.Offset, topics.ConsumersDead.Name, err)
	}
	d.count.Inc()
	return nil
}
