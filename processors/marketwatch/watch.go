// Package marketwatch is the market sampler job: every 5 minutes it asks each configured
// provider feed (infra/marketfeed) for its current prices, stores each answer as a sample
// (infra/marketstore) and publishes it to topic market.samples.v1 through the outbox, and
// prunes samples past the retention. GET /v1/market and /v1/market/history read what it
// stores. Replicas are safe: a sample is stored once per provider and 5-minute slot.
package marketwatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/marketfeed"
	"rental/schemas/market"
)

// Store is what the job writes; *marketstore.Store is one.
type Store interface {
	EnsureProvider(ctx context.Context, slug string, kinds []market.Kind) error
	AddSample(ctx context.Context, s market.Sample, every time.Duration) (bool, error)
	Prune(ctx context.Context, before time.Time) (int64, error)
}

// Options configure the job.
type Options struct {
	Feeds     []marketfeed.Feed // required (may be empty: the job then only prunes)
	Store     Store             // required
	Every     time.Duration     // default market.SampleEvery (5 min)
	Retention time.Duration     // default market.Retention (30 days)
	Timeout   time.Duration     // per feed and cycle; default 10 s
	// RetryEvery is how soon a feed that failed is tried again within its slot (default
	// 10 s), so that one failure (this service's own row before the pricer's first
	// snapshot, a provider's hiccup) does not leave its row empty for a whole Every.
	RetryEvery time.Duration
	Logger     *slog.Logger
	// Registerer receives market_samples_total{slug,result}; nil registers nothing.
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Watch is the job.
type Watch struct {
	o       Options
	log     *slog.Logger
	samples *prometheus.CounterVec
	known   sync.Map // slugs whose metadata row is known to exist
}

// New checks the options.
func New(o Options) (*Watch, error) {
	if o.Store == nil {
		return nil, errors.New("marketwatch: Store is required")
	}
	if o.Every <= 0 {
		o.Every = market.SampleEvery
	}
	if o.Retention <= 0 {
		o.Retention = market.Retention
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	w := &Watch{o: o, log: o.Logger.With("stage", "marketwatch")}
	w.samples = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "market_samples_total",
		Help: "Provider price samples by result: stored, duplicate (another replica had the slot) or failed.",
	}, []string{"slug", "result"})
	if o.Registerer != nil {
		if err := o.Registerer.Register(w.samples); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Run samples at once, then every Every, until ctx ends; feeds that failed are tried again
// every RetryEvery until they answer or the next cycle. A cycle's failures are logged and
// counted; they never stop the job.
func (w *Watch) Run(ctx context.Context) error {
	t := time.NewTicker(w.o.Every)
	defer t.Stop()
	_, failed := w.cycle(ctx, w.o.Feeds, true)
	for {
		var retry <-chan time.Time
		if len(failed) > 0 {
			retry = time.After(w.o.RetryEvery)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			_, failed = w.cycle(ctx, w.o.Feeds, true)
		case <-retry:
			_, failed = w.cycle(ctx, failed, false)
		}
	}
}

// Once runs one cycle: every feed concurrently, then pruning. It returns how many samples
// were stored.
func (w *Watch) Once(ctx context.Context) int {
	stored, _ := w.cycle(ctx, w.o.Feeds, true)
	return stored
}

// cycle samples feeds concurrently (then prunes, when prune is set) and returns how many
// samples were stored and the feeds that failed.
func (w *Watch) cycle(ctx context.Context, feeds []marketfeed.Feed, prune bool) (int, []marketfeed.Feed) {
	now := w.o.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	var failed []marketfeed.Feed
	for _, f := range feeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := w.sample(ctx, f, now)
			result := "stored"
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				result = "failed"
				failed = append(failed, f)
				w.log.Warn("market sample failed", "slug", f.Slug(), "err", err)
			case !ok:
				result = "duplicate"
			default:
				stored++
			}
			w.samples.WithLabelValues(f.Slug(), result).Inc()
		}()
	}
	wg.Wait()
	if !prune {
		return stored, failed
	}
	if n, err := w.o.Store.Prune(ctx, now.Add(-w.o.Retention)); err != nil {
		w.log.Warn("market sample pruning failed", "err", err)
	} else if n > 0 {
		w.log.Info("market samples pruned", "deleted", n)
	}
	return stored, failed
}

func (w *Watch) sample(ctx context.Context, f marketfeed.Feed, now time.Time) (bool, error) {
	if _, ok := w.known.Load(f.Slug()); !ok {
		if err := w.o.Store.EnsureProvider(ctx, f.Slug(), f.Kinds()); err != nil {
			return false, err
		}
		w.known.Store(f.Slug(), true)
	}
	fctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
	defer cancel()
	q, err := f.Quote(fctx)
	if err != nil {
		return false, err
	}
	return w.o.Store.AddSample(ctx, market.Sample{Slug: f.Slug(), TS: now, Quote: q}, w.o.Every)
}
