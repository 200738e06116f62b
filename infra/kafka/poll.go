package kafka

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Poll is the poll loop of a consumer that gives every assigned partition its own worker
// (Runner, and the webhook deliverer's delay-topic consumer): it polls until ctx ends or
// the client is closed, logs fetch errors, hands each partition's non-empty batch to
// deliver, and allows a rebalance only between polls (the client is built with
// kgo.BlockRebalanceOnPoll), so a revoke never races a batch being handed over. It returns
// nil when ctx ended and an error when the client closed under it.
func Poll(ctx context.Context, cl *kgo.Client, log *slog.Logger, deliver func(topic string, partition int32, records []*kgo.Record)) error {
	for {
		fetches := cl.PollRecords(ctx, 10_000)
		if ctx.Err() != nil {
			return nil
		}
		if fetches.IsClientClosed() {
			return errors.New("kafka: client closed")
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				log.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				deliver(p.Topic, p.Partition, p.Records)
			}
		})
		cl.AllowRebalance()
	}
}
