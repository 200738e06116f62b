// Package pricer is the pricer stage: every few seconds it reloads the price model (so an
// operator's change is live from the next cycle, without a deploy), collects supply (own pool,
// market providers, deep reserve), builds a pricing.Snapshot and publishes it
//
//   - to Postgres (the latest record of the network, infra/pricestore SaveSnapshot), the copy
//     that outlives a Redis loss: readers fall back to it when Redis has no fresh snapshot;
//   - to Redis (SET of the latest record plus PUBLISH of the same bytes, infra/pricecache),
//     which the edge's pricecache.Source keeps in memory so that requests never wait on
//     Redis or Postgres; and
//   - to the compacted Kafka topic topics.MarketData (key "snapshot"), the market-data product
//     for data teams.
//
// No write goes through the outbox: a snapshot is a derived cache recomputed from the
// model and the chain every cycle, not a money fact. Losing one costs nothing (the next cycle
// replaces it) and a duplicate is harmless on a compacted latest-value topic; what must not be
// lost (orders, charges) never depends on having received a particular snapshot: an order is
// priced from the snapshot the edge holds and the quote it stores.
package pricer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/metrics"
	"rental/infra/pricecache"
	"rental/infra/supply"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/pricing"
	"rental/schemas/topics"
)

// SnapshotStore keeps the latest snapshot record in Postgres; *pricestore.Store satisfies it.
type SnapshotStore interface {
	SaveSnapshot(ctx context.Context, n network.Network, asOf, validUntil time.Time, record []byte) error
}

// ModelSource loads the price model; *pricestore.Store satisfies it.
type ModelSource interface {
	Load(ctx context.Context, n network.Network) (pricing.Model, error)
}

// SupplySource gathers one cycle's supply; *supply.Collector satisfies it.
type SupplySource interface {
	Collect(ctx context.Context) (pricing.Supply, []supply.SourceError)
}

// DeliveredFunc returns the energy delivered since the given instant (00:00 UTC today).
type DeliveredFunc func(ctx context.Context, since time.Time) (int64, error)

// Options configure a Pricer.
type Options struct {
	Network network.Network
	Models  ModelSource
	Supply  SupplySource
	// Delivered feeds delivered_today; nil reports 0 (no order pipeline yet).
	Delivered DeliveredFunc
	// Snapshots keeps each snapshot in Postgres (the copy readers fall back to after a Redis
	// loss); nil skips it.
	Snapshots SnapshotStore
	// Producer publishes to topics.MarketData; nil skips Kafka.
	Producer *kgo.Client
	// Redis receives the latest record under RedisKey and on RedisChannel (infra/pricecache);
	// nil skips Redis.
	Redis *redis.Client
	// RedisKey defaults to pricecache.DefaultKey(Network), RedisChannel to RedisKey + ":updates".
	RedisKey     string
	RedisChannel string
	// Every is the cycle period (default 3 s). Keep it well under the model's ValidFor.
	Every time.Duration
	// Now is the clock (time.Now when nil).
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Pricer is the stage.
type Pricer struct {
	o     Options
	cache *pricecache.Writer // nil without Redis

	mu        sync.Mutex
	lastModel *pricing.Model
	lastOK    time.Time

	cycleSeconds prometheus.Histogram
	lastSuccess  prometheus.Gauge
	failures     *prometheus.CounterVec
	sourceErrors *prometheus.CounterVec
}

// New checks the options and registers the metrics.
func New(o Options) (*Pricer, error) {
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, fmt.Errorf("pricer: %w", err)
	}
	if o.Models == nil || o.Supply == nil {
		return nil, errors.New("pricer: Models and Supply are required")
	}
	if o.Every <= 0 {
		o.Every = 3 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Pricer{o: o}
	if o.Redis != nil {
		p.cache = pricecache.NewWriter(o.Redis, o.Network, o.RedisKey, o.RedisChannel)
	}
	p.cycleSeconds = metrics.Register(o.Registerer, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "pricer_cycle_duration_seconds", Help: "Duration of one pricing cycle (load, collect, build, publish).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}))
	p.lastSuccess = metrics.Register(o.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "pricer_last_success_timestamp_seconds", Help: "Unix time of the last fully published snapshot; alert on time() minus this.",
	}))
	metrics.Register(o.Registerer, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pricer_last_success_age_seconds", Help: "Seconds since the last fully published snapshot (-1 before the first).",
	}, p.successAge))
	p.failures = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pricer_cycle_failures_total", Help: "Pricing cycles that failed, by step.",
	}, []string{"step"}))
	p.sourceErrors = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pricer_supply_source_errors_total", Help: "Supply sources that failed in a cycle, by source.",
	}, []string{"source"}))
	return p, nil
}

func (p *Pricer) successAge() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastOK.IsZero() {
		return -1
	}
	return p.o.Now().Sub(p.lastOK).Seconds()
}

// Run runs a cycle at once and then every Options.Every until ctx ends. A failed cycle is
// logged and counted; the next one retries, and the edge keeps serving the last snapshot
// until its valid_until.
func (p *Pricer) Run(ctx context.Context) error {
	t := time.NewTicker(p.o.Every)
	defer t.Stop()
	for {
		if _, err := p.Cycle(ctx); err != nil && ctx.Err() == nil {
			p.o.Logger.Warn("pricer: cycle failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Cycle computes and publishes one snapshot and returns it. The model that fails to load or
// validate is replaced by the last good one (an operator's bad SQL edit must not stop
// pricing); supply sources that fail are reported and skipped. Publishing to Postgres, Redis
// and Kafka are each attempted (a Redis outage does not stop the Postgres copy); the error
// joins their failures.
func (p *Pricer) Cycle(ctx context.Context) (pricing.Snapshot, error) {
	start := time.Now()
	defer func() { p.cycleSeconds.Observe(time.Since(start).Seconds()) }()
	now := p.o.Now()

	model, err := p.o.Models.Load(ctx, p.o.Network)
	if err == nil {
		err = model.Validate()
	}
	p.mu.Lock()
	if err != nil {
		p.failures.WithLabelValues("model").Inc()
		if p.lastModel == nil {
			p.mu.Unlock()
			return pricing.Snapshot{}, fmt.Errorf("pricer: no usable price model: %w", err)
		}
		p.o.Logger.Error("pricer: price model unusable, keeping the last good revision", "err", err, "revision", p.lastModel.Revision)
		model = *p.lastModel
	} else {
		p.lastModel = &model
	}
	p.mu.Unlock()

	sup, failures := p.o.Supply.Collect(ctx)
	for _, f := range failures {
		p.sourceErrors.WithLabelValues(f.Source).Inc()
		p.o.Logger.Warn("pricer: supply source failed", "source", f.Source, "err", f.Err, "using_last_good", f.Stale)
	}

	var delivered int64
	if p.o.Delivered != nil {
		u := now.UTC()
		midnight := time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC)
		if delivered, err = p.o.Delivered(ctx, midnight); err != nil {
			p.failures.WithLabelValues("delivered").Inc()
			p.o.Logger.Warn("pricer: delivered_today unavailable, reporting 0", "err", err)
			delivered = 0
		}
	}

	snap, err := pricing.Build(pricing.Inputs{Model: model, Supply: sup, DeliveredToday: delivered, Now: now})
	if err != nil {
		p.failures.WithLabelValues("build").Inc()
		return pricing.Snapshot{}, err
	}
	if err := p.publish(ctx, snap); err != nil {
		return snap, err
	}
	p.mu.Lock()
	p.lastOK = p.o.Now()
	p.mu.Unlock()
	p.lastSuccess.Set(float64(now.Unix()))
	return snap, nil
}

func (p *Pricer) publish(ctx context.Context, snap pricing.Snapshot) error {
	body, err := json.Marshal(snap.Record())
	if err != nil {
		return fmt.Errorf("pricer: encode snapshot: %w", err)
	}
	var errs []error
	if p.o.Snapshots != nil {
		if err := p.o.Snapshots.SaveSnapshot(ctx, p.o.Network, snap.AsOf, snap.ValidUntil, body); err != nil {
			p.failures.WithLabelValues("postgres").Inc()
			errs = append(errs, fmt.Errorf("pricer: postgres: %w", err))
		}
	}
	if p.cache != nil {
		if err := p.cache.Put(ctx, body); err != nil {
			p.failures.WithLabelValues("redis").Inc()
			errs = append(errs, fmt.Errorf("pricer: redis: %w", err))
		}
	}
	if p.o.Producer != nil {
		rec := &kgo.Record{Topic: topics.MarketData.Name, Key: []byte(events.MarketDataKey), Value: body,
			Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}}
		if err := p.o.Producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			p.failures.WithLabelValues("kafka").Inc()
			errs = append(errs, fmt.Errorf("pricer: kafka: %w", err))
		}
	}
	return errors.Join(errs...)
}
