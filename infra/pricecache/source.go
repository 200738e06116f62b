package pricecache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// Durable is the Postgres copy of the latest snapshot record (the pricer writes it every
// cycle next to the Redis one); *pricestore.Store satisfies it. A nil record means none.
type Durable interface {
	LatestSnapshot(ctx context.Context, n network.Network) ([]byte, error)
}

// Source is the edge's pricing.SnapshotSource: it keeps the latest snapshot in memory,
// updated from the Writer's PUBLISH at once and from a GET of the key every PollEvery
// as a fallback (a missed message, a restart of Redis or of the edge). When that GET fails
// (Redis down) or finds no fresh snapshot (Redis flushed or restarted empty, a reader
// started during the outage), the same poll reads the Durable copy in Postgres, so prices
// survive a Redis loss for as long as the pricer keeps writing. Current is an atomic
// load: requests never touch Redis or Postgres, whatever the source read last.
type Source struct {
	client  *redis.Client
	durable Durable
	network network.Network
	key     string
	channel string
	every   time.Duration
	now     func() time.Time
	log     *slog.Logger

	redisDown   atomic.Bool  // the last GET failed (logged once per state change)
	redisFailed atomic.Int64 // failed GETs in the current outage
	blind       atomic.Bool  // stale and no source readable (logged once per state change)

	cur  atomic.Pointer[pricing.Snapshot]
	last atomic.Pointer[[]byte] // raw bytes of cur, to skip identical payloads cheaply

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever cur changes (Wait)
	ready   chan struct{} // closed once Run has subscribed and read the key
}

// SourceOptions configure a Source; zero values take the Writer's defaults.
type SourceOptions struct {
	Network   network.Network
	Key       string        // default DefaultKey(Network)
	Channel   string        // default Key + ":updates"
	PollEvery time.Duration // default 1 s
	// Durable is read when Redis fails or has no fresh snapshot; nil: Redis only.
	Durable Durable
	Now     func() time.Time
	Logger  *slog.Logger
}

// NewSource returns a source; call Run to fill it.
func NewSource(client *redis.Client, o SourceOptions) *Source {
	o.Key, o.Channel = names(o.Network, o.Key, o.Channel)
	if o.PollEvery <= 0 {
		o.PollEvery = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Source{client: client, durable: o.Durable, network: o.Network, key: o.Key, channel: o.Channel,
		every: o.PollEvery, now: o.Now, log: o.Logger, ready: make(chan struct{})}
}

// Current returns the latest snapshot. ok is false before the first one arrived and once the
// held one is past its valid_until (the spec forbids serving it beyond that): the pricer or
// Redis is then down for longer than the validity window and the caller answers 5xx.
func (s *Source) Current() (pricing.Snapshot, bool) {
	p := s.cur.Load()
	if p == nil || s.now().After(p.ValidUntil) {
		return pricing.Snapshot{}, false
	}
	return *p, true
}

// Refresh reads the key once and, when Redis failed or holds no fresh snapshot, the Durable
// copy. It fails only when no source could be read. Run calls it; tests and start-up code
// may call it to wait for a first snapshot deterministically.
func (s *Source) Refresh(ctx context.Context) error {
	b, rerr := s.client.Get(ctx, s.key).Bytes()
	switch {
	case rerr == nil:
		s.redisUp()
		if err := s.accept(b); err != nil {
			s.log.Warn("pricing snapshot: bad record in redis", "err", err)
		}
	case errors.Is(rerr, redis.Nil):
		s.redisUp()
		rerr = nil
	default:
		s.redisFailure(rerr)
	}
	if s.durable == nil || (rerr == nil && s.fresh()) {
		return rerr
	}
	d, err := s.durable.LatestSnapshot(ctx, s.network)
	if err != nil {
		return errors.Join(rerr, err)
	}
	if d != nil {
		if err := s.accept(d); err != nil {
			return errors.Join(rerr, err)
		}
	}
	return nil
}

// fresh reports whether the held snapshot may be served now.
func (s *Source) fresh() bool {
	_, ok := s.Current()
	return ok
}

// redisFailure counts a failed GET; the first of an outage is logged.
func (s *Source) redisFailure(err error) {
	s.redisFailed.Add(1)
	if !s.redisDown.Swap(true) {
		msg := "pricing snapshot: redis unavailable; reading the snapshot from postgres"
		if s.durable == nil {
			msg = "pricing snapshot: redis unavailable; keeping the snapshot held"
		}
		s.log.Warn(msg, "err", err)
	}
}

// redisUp ends an outage, logging it once with the count of failed reads.
func (s *Source) redisUp() {
	if s.redisDown.Swap(false) {
		s.log.Info("pricing snapshot: redis available again", "failed_reads", s.redisFailed.Swap(0))
	}
}

// accept installs a payload if it is newer than the snapshot held (messages and polls can
// arrive out of order).
func (s *Source) accept(b []byte) error {
	if last := s.last.Load(); last != nil && bytes.Equal(*last, b) {
		return nil
	}
	var md events.MarketData
	if err := json.Unmarshal(b, &md); err != nil {
		return err
	}
	snap, err := pricing.FromRecord(md)
	if err != nil {
		return err
	}
	for {
		old := s.cur.Load()
		if old != nil && !snap.AsOf.After(old.AsOf) {
			return nil
		}
		if s.cur.CompareAndSwap(old, &snap) {
			s.last.Store(&b)
			s.mu.Lock()
			if s.changed != nil {
				close(s.changed)
			}
			s.changed = make(chan struct{})
			s.mu.Unlock()
			return nil
		}
	}
}

// Wait blocks until the source holds a snapshot computed after the given instant (zero time:
// any snapshot) and returns it. The edge can use it at start to serve prices only once it has
// some; tests use it instead of polling.
func (s *Source) Wait(ctx context.Context, after time.Time) (pricing.Snapshot, error) {
	for {
		s.mu.Lock()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		if p := s.cur.Load(); p != nil && p.AsOf.After(after) {
			return *p, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return pricing.Snapshot{}, ctx.Err()
		}
	}
}

// Ready is closed once Run has subscribed and made its first read.
func (s *Source) Ready() <-chan struct{} { return s.ready }

// Run subscribes and polls until ctx ends; call it once.
func (s *Source) Run(ctx context.Context) error {
	sub := s.client.Subscribe(ctx, s.channel)
	defer sub.Close()
	// Wait for the subscription to be confirmed before the first read, so that no snapshot
	// published in between is missed (the poll would catch it, a second later).
	if _, err := sub.Receive(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("pricing snapshot: redis subscribe failed, polling only", "err", err)
	}
	msgs := sub.Channel()
	if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("pricing snapshot: no source could be read", "err", err)
	}
	close(s.ready)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-msgs:
			if !ok {
				return nil
			}
			if err := s.accept([]byte(m.Payload)); err != nil {
				s.log.Warn("pricing snapshot: bad published record", "err", err)
			}
		case <-t.C:
			// Redis failures are logged per state change by Refresh; no fresh snapshot with
			// no source readable (Redis and Postgres both down) is logged once too.
			err := s.Refresh(ctx)
			switch {
			case ctx.Err() != nil:
			case err != nil && !s.fresh():
				if !s.blind.Swap(true) {
					s.log.Error("pricing snapshot: no fresh snapshot and no source could be read; prices answer 5003", "err", err)
				}
			case err == nil && s.blind.Swap(false):
				s.log.Info("pricing snapshot: a source answers again")
			}
		}
	}
}
