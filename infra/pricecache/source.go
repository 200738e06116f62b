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

// Source is the edge's pricing.SnapshotSource: it keeps the latest snapshot in memory,
// updated from the Writer's PUBLISH at once and from a GET of the key every PollEvery
// as a fallback (a missed message, a restart of Redis or of the edge). Current is an atomic
// load: requests never touch Redis or Postgres.
type Source struct {
	client  *redis.Client
	key     string
	channel string
	every   time.Duration
	now     func() time.Time
	log     *slog.Logger

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
	Now       func() time.Time
	Logger    *slog.Logger
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
	return &Source{client: client, key: o.Key, channel: o.Channel, every: o.PollEvery, now: o.Now, log: o.Logger,
		ready: make(chan struct{})}
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

// Refresh reads the key once. Run calls it; tests and start-up code may call it to wait for a
// first snapshot deterministically.
func (s *Source) Refresh(ctx context.Context) error {
	b, err := s.client.Get(ctx, s.key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.accept(b)
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
		s.log.Warn("pricing snapshot: redis read failed", "err", err)
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
			if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("pricing snapshot: redis read failed", "err", err)
			}
		}
	}
}
