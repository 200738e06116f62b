// Package pricecache is the Redis copy of the latest pricing snapshot: the pricer writes
// each snapshot's record (events.MarketData) with a Writer, a SET of the key plus a
// PUBLISH of the same bytes on the key's channel, and the edge holds it in memory through a
// Source. The key and channel names are written here only.
//
// The copy is a derived cache: losing one costs nothing (the next cycle replaces it), and
// readers refuse a snapshot past its valid_until.
package pricecache

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"rental/schemas/network"
)

// DefaultKey is where the latest record of a network is kept.
func DefaultKey(n network.Network) string { return "pricing:snapshot:" + string(n) }

// TTL is how long the key outlives its last write: a dead pricer's snapshot leaves Redis
// soon after its validity ended.
const TTL = time.Hour

// names applies the defaults: DefaultKey(n), and the key + ":updates" channel.
func names(n network.Network, key, channel string) (string, string) {
	if key == "" {
		key = DefaultKey(n)
	}
	if channel == "" {
		channel = key + ":updates"
	}
	return key, channel
}

// Writer publishes snapshot records.
type Writer struct {
	client       *redis.Client
	key, channel string
}

// NewWriter returns a writer of n's snapshots; an empty key or channel takes the default.
func NewWriter(client *redis.Client, n network.Network, key, channel string) *Writer {
	key, channel = names(n, key, channel)
	return &Writer{client: client, key: key, channel: channel}
}

// Put stores record as the latest and publishes it, in one MULTI round trip.
func (w *Writer) Put(ctx context.Context, record []byte) error {
	_, err := w.client.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.Set(ctx, w.key, record, TTL)
		pipe.Publish(ctx, w.channel, record)
		return nil
	})
	return err
}
