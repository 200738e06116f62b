// Package health computes the component health behind GET /v1/status: api, database,
// payments (how fresh the chain follower is), delivery (how orders fared in the last hour)
// and supply (energy sellable now). Each component is judged operational, degraded or down;
// the service status is the worst of them. The edge renders a Report; this package knows
// nothing about HTTP.
package health

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Status is a component's or the whole service's state, ordered from best to worst.
type Status string

const (
	Operational Status = "operational"
	Degraded    Status = "degraded"
	Down        Status = "down"
)

func (s Status) rank() int {
	switch s {
	case Operational:
		return 0
	case Degraded:
		return 1
	}
	return 2 // Down, and anything unknown is treated as the worst
}

// Worst returns the worst of the given states (Operational for none). An unknown value
// counts as Down, so a bug never reports a broken component as healthy.
func Worst(states ...Status) Status {
	w := 0
	for _, s := range states {
		w = max(w, s.rank())
	}
	return [...]Status{Operational, Degraded, Down}[w]
}

// Payments is how far behind the chain follower that credits deposits is.
type Payments struct {
	Status Status
	// ScannerUpdatedSecondsAgo is whole seconds since chain_cursor 'chainwatch' last
	// moved; nil when there is no cursor yet or it could not be read.
	ScannerUpdatedSecondsAgo *int64
}

// Delivery is how orders fared in the last hour.
type Delivery struct {
	Status                  Status
	Orders1h, Failed1h      int64
	MedianDeliverySeconds1h *int64 // nil when no order was delivered in the hour
}

// Supply is the energy that can be sold now for a 1 h rental.
type Supply struct {
	Status          Status
	AvailableEnergy int64
}

// Report is one computation of every component.
type Report struct {
	Status   Status // worst component
	AsOf     time.Time
	API      Status
	Database Status
	Payments Payments
	Delivery Delivery
	Supply   Supply
}

// Options configures a Checker. Database is required; the others have defaults.
type Options struct {
	Database Database      // Postgres probes (NewPostgres)
	Delivery DeliveryStats // default NoDeliveryStats until issue 6 wires the orders query
	// Backlog, when set, makes delivery degraded while creation refuses new work for it.
	Backlog DeliveryBacklog
	// Custody, when set, makes delivery degraded while a pool has no usable signer (its
	// delegate permission is missing or changed on chain, infra/custody).
	Custody PoolCustody
	Supply  SupplySource // default: no pool configured, reported degraded with 0 energy
	Logger  *slog.Logger

	// TTL is how long a report is served from cache; the spec caches status for 10 s.
	TTL time.Duration
	// Timeout bounds one whole computation (each probe has its own shorter bound too).
	Timeout time.Duration
	// Payments thresholds on scanner_updated_s_ago (defaults 60 s and 300 s).
	PaymentsDegradedAfter, PaymentsDownAfter time.Duration

	now func() time.Time // tests
}

// Checker computes Reports, caching the last one for TTL. Concurrent callers that find the
// cache stale share one computation (singleflight), so a burst of status requests costs
// one round of probes.
type Checker struct {
	opts Options
	sf   singleflight.Group

	mu     sync.Mutex
	cached Report
	at     time.Time
}

// NewChecker applies defaults to opts.
func NewChecker(opts Options) *Checker {
	if opts.Delivery == nil {
		opts.Delivery = NoDeliveryStats{}
	}
	if opts.Supply == nil {
		opts.Supply = noSupply{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TTL <= 0 {
		opts.TTL = 10 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Second
	}
	if opts.PaymentsDegradedAfter <= 0 {
		opts.PaymentsDegradedAfter = 60 * time.Second
	}
	if opts.PaymentsDownAfter <= 0 {
		opts.PaymentsDownAfter = 300 * time.Second
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	return &Checker{opts: opts}
}

// Report returns the cached report when younger than TTL, otherwise computes a new one.
// It never fails: a probe that cannot answer makes its component degraded or down.
func (c *Checker) Report(ctx context.Context) Report {
	c.mu.Lock()
	if !c.at.IsZero() && c.opts.now().Sub(c.at) < c.opts.TTL {
		r := c.cached
		c.mu.Unlock()
		return r
	}
	c.mu.Unlock()

	// Detached from the first caller's context: other callers share this result, and one
	// client hanging up must not fail it for everyone. The computation is bounded by
	// Timeout, so waiting for it is bounded too.
	v, _, _ := c.sf.Do("report", func() (any, error) {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.Timeout)
		defer cancel()
		r := c.compute(pctx)
		c.mu.Lock()
		c.cached, c.at = r, c.opts.now()
		c.mu.Unlock()
		return r, nil
	})
	return v.(Report)
}

// compute runs every probe concurrently.
func (c *Checker) compute(ctx context.Context) Report {
	r := Report{AsOf: c.opts.now(), API: Operational}
	var wg sync.WaitGroup
	wg.Go(func() { r.Database = c.database(ctx) })
	wg.Go(func() { r.Payments = c.payments(ctx) })
	wg.Go(func() { r.Delivery = c.delivery(ctx) })
	wg.Go(func() { r.Supply = c.supply(ctx) })
	wg.Wait()
	r.Status = Worst(r.API, r.Database, r.Payments.Status, r.Delivery.Status, r.Supply.Status)
	return r
}

func (c *Checker) database(ctx context.Context) Status {
	if err := c.opts.Database.Ping(ctx); err != nil {
		c.opts.Logger.Warn("status: database probe failed", "err", err)
		return Down
	}
	return Operational
}

// payments judges chainwatch's freshness. A follower that stopped moving means deposits
// are not credited: degraded after PaymentsDegradedAfter, down after PaymentsDownAfter.
// No cursor yet (a fresh deployment) or an unreadable one is degraded with a null age;
// the database component already carries a database outage.
func (c *Checker) payments(ctx context.Context) Payments {
	age, ok, err := c.opts.Database.ScannerAge(ctx)
	if err != nil {
		c.opts.Logger.Warn("status: payments probe failed", "err", err)
		return Payments{Status: Degraded}
	}
	if !ok {
		return Payments{Status: Degraded}
	}
	secs := int64(age / time.Second)
	p := Payments{Status: Operational, ScannerUpdatedSecondsAgo: &secs}
	switch {
	case age > c.opts.PaymentsDownAfter:
		p.Status = Down
	case age > c.opts.PaymentsDegradedAfter:
		p.Status = Degraded
	}
	if sp, ok := c.opts.Database.(ScannerProblems); ok && p.Status == Operational {
		// The follower refuses its node (another chain, a head below the cursor): it
		// may still be polling, but it credits nothing.
		if problem, err := sp.ScannerProblem(ctx); err != nil || problem != "" {
			p.Status = Degraded
		}
	}
	return p
}

func (c *Checker) delivery(ctx context.Context) Delivery {
	w, err := c.opts.Delivery.DeliveryLastHour(ctx)
	if err != nil {
		c.opts.Logger.Warn("status: delivery probe failed", "err", err)
		return Delivery{Status: Degraded}
	}
	status := judgeDelivery(w)
	if c.opts.Backlog != nil {
		if _, behind := c.opts.Backlog.Behind(); behind {
			status = Worst(status, Degraded)
		}
	}
	if c.opts.Custody != nil {
		problems, err := c.opts.Custody.PoolCustodyProblems(ctx)
		if err != nil || len(problems) > 0 {
			status = Worst(status, Degraded)
		}
	}
	return Delivery{
		Status:                  status,
		Orders1h:                w.Orders,
		Failed1h:                w.Failed,
		MedianDeliverySeconds1h: w.MedianDeliverySeconds,
	}
}

// supply is down when the node cannot be asked (nothing can be delegated) and degraded
// when it answers but no energy is left to sell.
func (c *Checker) supply(ctx context.Context) Supply {
	n, err := c.opts.Supply.AvailableEnergy(ctx)
	if err != nil {
		c.opts.Logger.Warn("status: supply probe failed", "err", err)
		return Supply{Status: Down}
	}
	if n <= 0 {
		return Supply{Status: Degraded}
	}
	return Supply{Status: Operational, AvailableEnergy: n}
}
