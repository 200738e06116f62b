package orderstore

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/metrics"
	"rental/schemas/network"
)

// The delivery backlog: orders accepted (charged) whose delegation has not been sent yet,
// statuses created, paid and allocating. Acceptance refuses new work while the oldest of
// them is older than a bound (docs/orders.md "Backpressure"); GET /v1/status and the
// metrics show it. It is read at most once per Every from the database, in the background,
// never on an order's path: callers get the last reading.

// DefaultBacklogMaxAge is the bound of ORDER_BACKLOG_MAX_AGE: a rental starting a minute
// late has lost a fifth of the shortest tier (5 min); normal delivery takes seconds.
const DefaultBacklogMaxAge = 60 * time.Second

// DefaultBacklogEvery is how often the backlog is read while someone asks.
const DefaultBacklogEvery = time.Second

// BacklogOptions configure a Backlog.
type BacklogOptions struct {
	Network network.Network
	// MaxAge is how old the oldest undelivered order may be before the backlog counts as
	// behind (default DefaultBacklogMaxAge).
	MaxAge time.Duration
	// Every is the reading's refresh interval (default DefaultBacklogEvery); a reading
	// older than Every is refreshed in the background when asked for.
	Every  time.Duration
	Now    func() time.Time
	Logger *slog.Logger
}

// BacklogReading is one reading of the backlog.
type BacklogReading struct {
	Orders int64     // accepted, not yet broadcast
	Oldest time.Time // created_at of the oldest of them; zero when none
	ReadAt time.Time // zero: never read
}

// Backlog is the cached delivery backlog. Safe for concurrent use.
type Backlog struct {
	db      Querier
	o       BacklogOptions
	cur     atomic.Pointer[BacklogReading]
	reading atomic.Bool // a refresh is running
	mu      sync.Mutex  // serialises Refresh
}

// NewBacklog reads the backlog through db (a pool).
func NewBacklog(db Querier, o BacklogOptions) *Backlog {
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultBacklogMaxAge
	}
	if o.Every <= 0 {
		o.Every = DefaultBacklogEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Backlog{db: db, o: o}
	b.cur.Store(&BacklogReading{})
	return b
}

// MaxAge is the bound beyond which the backlog is behind.
func (b *Backlog) MaxAge() time.Duration { return b.o.MaxAge }

// backlogQuery reads the backlog of network $1. orders_undelivered (migration 00026) holds
// exactly these statuses: the read costs what the backlog holds, not what the table does.
const backlogQuery = `SELECT count(*), min(created_at) FROM orders
	WHERE status IN ('created', 'paid', 'allocating') AND network = $1`

// Refresh reads the backlog now (one statement).
func (b *Backlog) Refresh(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var r BacklogReading
	var oldest *time.Time
	if err := b.db.QueryRow(ctx, backlogQuery, string(b.o.Network)).Scan(&r.Orders, &oldest); err != nil {
		return err
	}
	if oldest != nil {
		r.Oldest = *oldest
	}
	r.ReadAt = b.o.Now()
	b.cur.Store(&r)
	return nil
}

// Reading returns the last reading and, when it is older than Every, starts one refresh in
// the background (at most one at a time); it never waits for the database.
func (b *Backlog) Reading() BacklogReading {
	r := *b.cur.Load()
	if b.o.Now().Sub(r.ReadAt) >= b.o.Every && b.reading.CompareAndSwap(false, true) {
		go func() {
			defer b.reading.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := b.Refresh(ctx); err != nil {
				b.o.Logger.Warn("delivery backlog unreadable; the last reading stands", "err", err)
			}
		}()
	}
	return r
}

// Behind reports the age of the oldest undelivered order and whether it is beyond MaxAge,
// from the last reading. A reading that could not be refreshed for 10×Every (the database
// is failing, which creation reports by itself) counts as not behind.
func (b *Backlog) Behind() (age time.Duration, behind bool) {
	r := b.Reading()
	now := b.o.Now()
	if r.Oldest.IsZero() || now.Sub(r.ReadAt) > 10*b.o.Every {
		return 0, false
	}
	age = now.Sub(r.Oldest)
	return age, age > b.o.MaxAge
}

// Register exports the backlog as rental_delivery_backlog_orders and
// rental_delivery_backlog_age_seconds (0 when empty); scraping refreshes the reading.
func (b *Backlog) Register(reg prometheus.Registerer) {
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rental_delivery_backlog_orders",
		Help: "Orders accepted and charged whose delegation has not been broadcast yet (created, paid, allocating).",
	}, func() float64 { return float64(b.Reading().Orders) }))
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rental_delivery_backlog_age_seconds",
		Help: "Age of the oldest order accepted and not yet broadcast; creation refuses with 5050 above ORDER_BACKLOG_MAX_AGE.",
	}, func() float64 {
		r := b.Reading()
		if r.Oldest.IsZero() {
			return 0
		}
		return b.o.Now().Sub(r.Oldest).Seconds()
	}))
}
