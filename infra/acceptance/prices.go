package acceptance

// The live pricer (docs/pricing.md): prices come from the in-memory snapshot the pricer
// publishes (pricing.SnapshotSource), so pricing touches no database. The only I/O is the
// receiver's activation check, a node read cached for a few seconds (ActivationCache).
// Order acceptance, the estimate and the quote endpoints share one Prices, so they agree
// on the snapshot and on every receiver's activation state.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// AccountReader reads an account from the chain; *tron.Client is one. A never-activated
// address is an Account whose Exists is false, not an error.
type AccountReader interface {
	GetAccount(ctx context.Context, addr tron.Address) (*tron.Account, error)
}

// PricesOptions are the live pricer's dependencies.
type PricesOptions struct {
	Network   network.Network        // required; a snapshot of another network is not served
	Snapshots pricing.SnapshotSource // required: the pricer's latest snapshot, in memory
	Chain     AccountReader          // required: the node the receiver activation is read from
	// ActivationTTL is how long a receiver seen not activated is cached (default 5 s); one
	// seen activated is kept longer (see ActivationCache).
	ActivationTTL time.Duration
	// ChainTimeout bounds one node read (default 2 s).
	ChainTimeout time.Duration
	Logger       *slog.Logger     // default: discard
	Now          func() time.Time // default time.Now; tests move it
}

// Prices prices requests from the pricer's latest snapshot.
type Prices struct {
	o          PricesOptions
	log        *slog.Logger
	activation *ActivationCache
}

// NewPrices checks the options.
func NewPrices(o PricesOptions) (*Prices, error) {
	if o.Snapshots == nil || o.Chain == nil {
		return nil, errors.New("acceptance: prices: Snapshots and Chain are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, errors.New("acceptance: prices: " + err.Error())
	}
	if o.ActivationTTL <= 0 {
		o.ActivationTTL = 5 * time.Second
	}
	if o.ChainTimeout <= 0 {
		o.ChainTimeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Prices{o: o, log: o.Logger.With("module", "pricing")}
	p.activation = NewActivationCache(o.Chain, o.ActivationTTL, o.ChainTimeout, o.Now)
	return p, nil
}

// Now is the pricer's clock (quotes and orders are stamped with it).
func (m *Prices) Now() time.Time { return m.o.Now() }

// Network is the network the prices are served for.
func (m *Prices) Network() network.Network { return m.o.Network }

// Snapshot returns the snapshot to price from: 503 5003 chain_unavailable while there is
// none, when it is past its valid_until (the pricer stopped publishing; prices past
// their validity are not served, least of all locked into quotes) or of another network.
// Each carries Retry-After (SnapshotRetryAfter): the snapshot source polls once a second.
func (m *Prices) Snapshot() (pricing.Snapshot, error) {
	s, ok := m.o.Snapshots.Current()
	switch {
	case !ok:
		return s, apierr.ChainUnavailable.New("prices are not available yet; retry shortly").With("reason", "no_price_snapshot").
			WithRetryAfter(SnapshotRetryAfter)
	case s.Network != m.o.Network:
		m.log.Error("pricing snapshot of another network ignored", "snapshot", s.Network, "edge", m.o.Network)
		return s, apierr.ChainUnavailable.New("prices are not available; retry shortly").With("reason", "no_price_snapshot").
			WithRetryAfter(SnapshotRetryAfter)
	case m.o.Now().After(s.ValidUntil):
		return s, apierr.ChainUnavailable.New("prices are being refreshed; retry shortly").
			With("reason", "price_snapshot_stale").With("valid_until", events.FormatTime(s.ValidUntil)).
			WithRetryAfter(SnapshotRetryAfter)
	}
	return s, nil
}

// SnapshotRetryAfter is the Retry-After (seconds) of 5003 without a fresh snapshot and of
// 5003 when the receiver's activation could not be read: the snapshot source reads Redis,
// or Postgres after a Redis loss, every second, and a failed node read is not cached.
const SnapshotRetryAfter = 1

// Activation is one answer of ActivationCache.Activated: Known is false when the node
// could not be read.
type Activation struct{ Activated, Known bool }

// Activated reads the receiver's activation state through the cache.
func (m *Prices) Activated(ctx context.Context, addr tron.Address) Activation {
	var a Activation
	a.Activated, a.Known = m.activation.Activated(ctx, addr)
	return a
}

// PriceRequest is a validated estimate, quote or order request.
type PriceRequest struct {
	Resource pricing.Resource
	Tier     pricing.Tier // "" for activation
	Amount   int64        // 1 for activation
	Receiver *tron.Address
	// Activation, when set, is the receiver's state read just before (order acceptance
	// reads it before its transaction opens); Price then asks the node nothing.
	Activation *Activation
}

// Priced is a request priced from a snapshot, activation fee included.
type Priced struct {
	Req   PriceRequest
	Quote pricing.Quote
	// Activated is the receiver's state; nil without receiver or when the node failed.
	Activated *bool
	// ActivateSun is the activation part: the activation price for resource activation,
	// or the fee when the receiver is known not to be activated.
	ActivateSun int64
	AsOf        time.Time
}

// Total is the resource's price plus the activation part.
func (p Priced) Total() int64 { return p.Quote.EnergyAmountSun + p.ActivateSun }

// UnitPrice is the exact unit price (hundredths of a SUN) and its legacy whole-SUN form.
// Activation is one unit at the activation price.
func (p Priced) UnitPrice() (pricing.Centisun, int64) {
	if p.Req.Resource == pricing.Activation {
		return pricing.SunToCentisun(p.ActivateSun), p.ActivateSun
	}
	return p.Quote.UnitPriceSun, p.Quote.PriceSunPerUnit
}

// Price prices req from the current snapshot and adds the activation fee when the receiver
// is not activated. binding (quotes, orders) makes an unknown activation state an error
// (5003): a quote must not lock a total that may lack the fee. An estimate reports it as
// receiver_activated null and adds no fee.
func (m *Prices) Price(ctx context.Context, req PriceRequest, binding bool) (Priced, error) {
	s, err := m.Snapshot()
	if err != nil {
		return Priced{}, err
	}
	pq, err := s.Price(req.Resource, req.Tier, req.Amount)
	if err != nil {
		return Priced{}, err
	}
	p := Priced{Req: req, Quote: pq, AsOf: s.AsOf}
	if req.Resource == pricing.Activation {
		p.ActivateSun = pq.ActivateAmountSun
	}
	if req.Receiver != nil {
		var a Activation
		if req.Activation != nil {
			a = *req.Activation
		} else {
			a = m.Activated(ctx, *req.Receiver)
		}
		switch {
		case a.Known:
			activated := a.Activated
			p.Activated = &activated
		case binding:
			return Priced{}, apierr.ChainUnavailable.New("the receiver's activation could not be read from the chain; retry shortly").
				WithField("receiver").WithRetryAfter(SnapshotRetryAfter)
		}
		if a.Known && !a.Activated && req.Resource != pricing.Activation {
			fee, err := s.ActivationPriceSun()
			if err != nil {
				return Priced{}, apierr.SupplyPaused.New("the receiver is not activated and activation sales are paused").
					WithField("receiver")
			}
			p.ActivateSun = fee
		}
	}
	return p, nil
}

// ActivationCache answers whether an address is activated on chain, reading the node at
// most once per address per TTL (concurrent misses share one read). "Not activated" is kept
// for the TTL only: it changes when somebody activates the address. "Activated" is kept for
// activatedTTL: java-tron never deletes an account, so re-reading it every few seconds
// would only cost the node a read per receiver and order burst. A failed read is not
// cached: the next request tries again; meanwhile an address once seen activated stays so,
// and any other is unknown.
type ActivationCache struct {
	node    AccountReader
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time
	group   singleflight.Group

	mu      sync.Mutex
	entries map[tron.Address]activationEntry
}

type activationEntry struct {
	activated bool
	at        time.Time
}

// activatedTTL is how long an address seen activated is not read again. It is not forever
// so that an activation seen on a block later dropped by a fork is corrected in bounded
// time (a delegation to such a receiver fails at the node and its fill is refunded).
const activatedTTL = 10 * time.Minute

// fresh reports whether e still answers without a node read.
func (c *ActivationCache) fresh(e activationEntry, now time.Time) bool {
	if e.activated {
		return now.Sub(e.at) < max(c.ttl, activatedTTL)
	}
	return now.Sub(e.at) < c.ttl
}

// maxActivationEntries bounds the cache; above it expired entries are swept, and if none
// had expired the cache is cleared (a flood of distinct addresses must not grow memory).
const maxActivationEntries = 100_000

// NewActivationCache returns a cache over node.
func NewActivationCache(node AccountReader, ttl, timeout time.Duration, now func() time.Time) *ActivationCache {
	return &ActivationCache{node: node, ttl: ttl, timeout: timeout, now: now, entries: map[tron.Address]activationEntry{}}
}

// Activated reports whether addr is activated; known is false when the node could not be
// read.
func (c *ActivationCache) Activated(ctx context.Context, addr tron.Address) (activated, known bool) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[addr]
	c.mu.Unlock()
	if ok && c.fresh(e, now) {
		return e.activated, true
	}
	v, err, _ := c.group.Do(string(addr[:]), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		a, err := c.node.GetAccount(rctx, addr)
		if err != nil {
			return false, err
		}
		act := a.Exists()
		c.mu.Lock()
		if len(c.entries) >= maxActivationEntries {
			for k, e := range c.entries {
				if !c.fresh(e, now) {
					delete(c.entries, k)
				}
			}
			if len(c.entries) >= maxActivationEntries {
				clear(c.entries)
			}
		}
		c.entries[addr] = activationEntry{activated: act, at: now}
		c.mu.Unlock()
		return act, nil
	})
	if err != nil {
		if ok && e.activated {
			// An account once created on chain is never deleted: an expired "activated"
			// still holds, so orders to known receivers go on while the node is away.
			// "Not activated" is never served stale: it may have changed, and it adds a fee.
			return true, true
		}
		return false, false
	}
	return v.(bool), true
}
