package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// CommitSync commits offsets synchronously and returns the first failure: the request's, or
// a partition's error code in the response. Callers keep offsets pending on failure, so the
// next commit carries them.
func CommitSync(ctx context.Context, cl *kgo.Client, offsets map[string]map[int32]kgo.EpochOffset) error {
	var failed error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			failed = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					failed = fmt.Errorf("%s[%d]: %w", t.Topic, p.Partition, e)
				}
			}
		}
	})
	return failed
}
