package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/depstate"
	"rental/infra/metrics"
	"rental/infra/pg"
)

// shardLockClass is the first half of the (class, shard) advisory lock a relay holds on a
// shard while it publishes a batch of it. Any constant works if every relay uses it.
const shardLockClass = 736_610

// RelayOptions configures a Relay. Pool and Producer are required.
type RelayOptions struct {
	Pool *pgxpool.Pool
	// Producer publishes the rows; it must be idempotent (franz-go's default, see
	// infra/kafka.ClientOpts) so that retries inside one batch neither duplicate nor
	// reorder records. The relay does not close it.
	Producer *kgo.Client

	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil = prometheus.DefaultRegisterer

	// PollEvery is how often the relay asks which shards have unpublished rows (one
	// index probe per shard): the delay between a commit and its publication. Default 10ms.
	PollEvery time.Duration
	// SweepEvery is how often every shard is visited regardless, and the backlog metrics
	// refreshed. Default 1s.
	SweepEvery time.Duration
	// BatchSize is the most rows published per transaction (of one or more shards). Default 500.
	BatchSize int
	// Workers is how many shards this relay publishes concurrently. Default 4.
	Workers int
	// PruneAfter is how long published rows are kept (for inspection) before deletion;
	// PruneEvery how often the pruner runs. Defaults 1h and 1m.
	PruneAfter, PruneEvery time.Duration
}

// Relay publishes committed outbox rows to Kafka.
//
// Fast path: every PollEvery the relay finds the shards with unpublished rows (the partial
// index on unpublished rows makes it 16 index probes) and publishes them. Slow path: a
// sweep every SweepEvery visits every shard. Either way shards are published under
// transaction-scoped advisory locks: the relay takes the locks of the shards that woke it
// (all in one transaction), reads their oldest unpublished rows in id order, produces them
// synchronously, marks them published and commits. Only one relay (of any
// number of replicas) works on a shard at a time, and the next batch starts only after the
// previous one is acknowledged by Kafka and marked, so rows of one key reach Kafka in id
// order. A crash between produce and commit republishes the batch: at least once.
type Relay struct {
	o     RelayOptions
	log   *slog.Logger
	sched *scheduler
	// behind is whether the last batch was full: there is a backlog to share out.
	behind atomic.Bool

	published *prometheus.CounterVec
	backlog   prometheus.Gauge
	age       prometheus.Gauge
	failures  prometheus.Counter
	// One log line per change of state (with the count of failures meanwhile), not one per
	// failed poll: the poll runs every PollEvery (10 ms) through a database outage.
	store      *depstate.Tracker
	publishing *depstate.Tracker
}

// NewRelay validates the options and registers the metrics.
func NewRelay(o RelayOptions) (*Relay, error) {
	if o.Pool == nil || o.Producer == nil {
		return nil, errors.New("outbox relay: Pool and Producer are required")
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Second
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 10 * time.Millisecond
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.PruneAfter <= 0 {
		o.PruneAfter = time.Hour
	}
	if o.PruneEvery <= 0 {
		o.PruneEvery = time.Minute
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Relay{
		o:          o,
		log:        log.With("stage", "relay"),
		sched:      newScheduler(),
		store:      depstate.New("postgres (outbox)", log.With("stage", "relay")),
		publishing: depstate.New("outbox publishing", log.With("stage", "relay")),
		published: metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rental_outbox_published_total",
			Help: "Outbox rows published to Kafka and marked published, by topic.",
		}, []string{"topic"})),
		backlog: metrics.Register(o.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rental_outbox_backlog_rows",
			Help: "Unpublished outbox rows at the last sweep (counted up to 100000).",
		})),
		age: metrics.Register(o.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rental_outbox_backlog_age_seconds",
			Help: "Age of the oldest unpublished outbox row at the last sweep; 0 when none.",
		})),
		failures: metrics.Register(o.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rental_outbox_publish_failures_total",
			Help: "Shard batches that failed to publish and will be retried.",
		})),
	}, nil
}

// Run publishes until ctx is cancelled. Batches in flight at cancellation are finished
// (bounded by a timeout) so a clean shutdown leaves no published-but-unmarked rows.
func (r *Relay) Run(ctx context.Context) error {
	r.log.Info("outbox relay up", "shards", Shards, "workers", r.o.Workers, "sweep_every", r.o.SweepEvery)
	var wg sync.WaitGroup
	wg.Go(func() { r.poll(ctx) })
	wg.Go(func() { r.sweep(ctx) })
	wg.Go(func() { r.prune(ctx) })
	for range r.o.Workers {
		wg.Go(func() { r.work(ctx) })
	}
	r.sched.markAll() // rows left by a previous run
	wg.Wait()
	r.log.Info("outbox relay stopped")
	return nil
}

func (r *Relay) work(ctx context.Context) {
	for {
		// While the relay keeps up, a worker takes every shard that woke, so that one
		// transaction publishes what one poll found; behind (a batch came back full),
		// each worker takes its share, so that the backlog is published by every worker
		// at once.
		take := Shards
		if r.behind.Load() {
			take = (Shards + r.o.Workers - 1) / r.o.Workers
		}
		shards, ok := r.sched.takeMany(ctx, take)
		if !ok {
			return
		}
		busy, err := r.drain(ctx, shards)
		for _, s := range shards {
			r.sched.finish(s)
		}
		if err != nil {
			r.failures.Inc()
			r.publishing.Observe(fmt.Errorf("shards %v: %w", shards, err))
			for _, s := range shards {
				r.sched.markAfter(s, time.Second)
			}
			continue
		}
		r.publishing.Observe(nil)
		// Another relay holds these; it may have read them before the row that woke us
		// committed. Look again shortly rather than wait for the sweep.
		for _, s := range busy {
			r.sched.markAfter(s, 50*time.Millisecond)
		}
	}
}

// drain publishes batches of shards until they have no unpublished rows. busy are the
// shards another relay held.
func (r *Relay) drain(ctx context.Context, shards []int) (busy []int, err error) {
	for ctx.Err() == nil {
		n, locked, held, err := r.publishBatch(ctx, shards)
		busy = append(busy, held...)
		r.behind.Store(err == nil && n >= r.o.BatchSize)
		if err != nil || n < r.o.BatchSize {
			return busy, err
		}
		shards = locked
	}
	return busy, nil
}

type row struct {
	id        int64
	topic     string
	key       string
	value     []byte
	headers   map[string]string
	createdAt time.Time
}

// publishBatch publishes the oldest unpublished rows (up to BatchSize, in id order) of
// those of shards it can lock, in one transaction: one round trip per step however many
// shards there are, which is what keeps the relay's cost per row low when every shard
// has only a row or two each time it polls. Taking the rows in id order across shards
// takes, of each shard, a prefix of its unpublished rows, so per-key order holds.
//
// The transaction costs two round trips: BEGIN, the shard locks and the read travel
// together (pg.BeginWith), and so do the mark and COMMIT (pg.QueueCommit). On any error
// it is rolled back (a connection that cannot be is dropped by the pool).
func (r *Relay) publishBatch(ctx context.Context, shards []int) (n int, locked, busy []int, err error) {
	// A batch that started is finished even during shutdown, so it gets marked.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 45*time.Second)
	defer cancel()
	conn, err := r.o.Pool.Acquire(bctx)
	if err != nil {
		return 0, nil, nil, err
	}
	defer conn.Release()

	var batch []row
	b := &pgx.Batch{}
	b.Queue(pg.IndexPlans)
	// The mark is committed without waiting for its WAL flush: a mark lost with a server
	// crash republishes its rows, which a crash between produce and mark does anyway
	// (delivery is at least once; consumers deduplicate). Lost marks are always the latest
	// ones (the WAL is a prefix), and any later synchronous commit on the server makes
	// them durable. This takes the relay's commits (one per poll that found rows) out of
	// the queue for the WAL flush that every order creation waits in.
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	// The shards locked are also left in a transaction-local setting for the read, which
	// must see only those: it is a statement of its own, so its snapshot is taken after
	// the locks are held (a shard's previous holder has committed its marks by then).
	b.Queue(`SELECT l.a, set_config('rental.relay_shards', l.a::text, true)
		FROM (SELECT coalesce(array_agg(s), '{}')::int[] AS a
		      FROM unnest($2::int[]) s WHERE pg_try_advisory_xact_lock($1, s)) l`, shardLockClass, shards).
		QueryRow(func(row pgx.Row) error {
			var setting string
			return row.Scan(&locked, &setting)
		})
	b.Queue(`SELECT id, topic, key, value, headers, created_at FROM outbox
		WHERE shard = ANY(current_setting('rental.relay_shards')::int[]) AND published_at IS NULL
		ORDER BY id LIMIT $1`, r.o.BatchSize).
		Query(func(rows pgx.Rows) (err error) {
			batch, err = pgx.CollectRows(rows, func(rs pgx.CollectableRow) (row, error) {
				var x row
				err := rs.Scan(&x.id, &x.topic, &x.key, &x.value, &x.headers, &x.createdAt)
				return x, err
			})
			return err
		})
	tx, err := pg.BeginWith(bctx, conn.Conn(), b)
	if err != nil {
		return 0, nil, nil, err
	}
	defer tx.Rollback(bctx) //nolint:errcheck // no-op once committed
	for _, s := range shards {
		if !slices.Contains(locked, s) {
			busy = append(busy, s)
		}
	}
	if len(batch) == 0 {
		return 0, locked, busy, tx.Commit(bctx)
	}

	recs := make([]*kgo.Record, len(batch))
	ids := make([]int64, len(batch))
	for i, x := range batch {
		hs := make([]kgo.RecordHeader, 0, len(x.headers)+1)
		for k, v := range x.headers {
			hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		hs = append(hs, kgo.RecordHeader{Key: HeaderOutboxID, Value: []byte(strconv.FormatInt(x.id, 10))})
		recs[i] = &kgo.Record{Topic: x.topic, Key: []byte(x.key), Value: x.value, Headers: hs, Timestamp: x.createdAt}
		ids[i] = x.id
	}
	// ProduceSync hands records to the idempotent producer in slice order, which is id
	// order, and returns once every one is acknowledged or failed. A failure leaves the
	// whole batch unmarked; with idempotence a later record of a partition cannot land
	// while an earlier one failed, so the retry cannot reorder a key.
	if err := r.o.Producer.ProduceSync(bctx, recs...).FirstErr(); err != nil {
		return 0, nil, nil, fmt.Errorf("produce: %w", err)
	}
	b = &pgx.Batch{}
	b.Queue(`UPDATE outbox SET published_at = now() WHERE id = ANY($1)`, ids)
	committed := pg.QueueCommit(b, tx)
	if err := conn.SendBatch(bctx, b).Close(); err != nil {
		return 0, nil, nil, err
	}
	if err := committed(); err != nil {
		return 0, nil, nil, err
	}
	for _, x := range batch {
		r.published.WithLabelValues(x.topic).Inc()
	}
	return len(batch), locked, busy, nil
}

// poll marks the shards that have unpublished rows.
func (r *Relay) poll(ctx context.Context) {
	t := time.NewTicker(r.o.PollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rows, err := r.o.Pool.Query(ctx, `SELECT s FROM generate_series(0, $1::int - 1) s
			WHERE EXISTS (SELECT 1 FROM outbox WHERE shard = s AND published_at IS NULL)`, Shards)
		if err != nil {
			if ctx.Err() == nil {
				r.store.Observe(err)
			}
			continue
		}
		shards, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if ctx.Err() == nil {
			r.store.Observe(err)
		}
		if err != nil {
			continue
		}
		r.sched.markMany(shards)
	}
}

func (r *Relay) sweep(ctx context.Context) {
	t := time.NewTicker(r.o.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.sched.markAll()
		var count int64
		var age float64
		err := r.o.Pool.QueryRow(ctx, `
			SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
			FROM (SELECT created_at FROM outbox WHERE published_at IS NULL LIMIT 100000) b`).Scan(&count, &age)
		if err != nil {
			if ctx.Err() == nil {
				r.store.Observe(err)
			}
			continue
		}
		r.backlog.Set(float64(count))
		r.age.Set(age)
	}
}

// prune deletes published rows older than PruneAfter, in bounded chunks so it never holds
// long locks or bloats one transaction.
func (r *Relay) prune(ctx context.Context) {
	t := time.NewTicker(r.o.PruneEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := Prune(ctx, r.o.Pool, r.o.PruneAfter); ctx.Err() == nil {
			r.store.Observe(err)
		}
	}
}

// Prune deletes rows published more than olderThan ago and returns how many it deleted.
// Unpublished rows are never deleted.
func Prune(ctx context.Context, pool *pgxpool.Pool, olderThan time.Duration) (int64, error) {
	const chunk = 5000
	var total int64
	for {
		tag, err := pool.Exec(ctx, `
			DELETE FROM outbox WHERE id IN (
				SELECT id FROM outbox
				WHERE published_at IS NOT NULL AND published_at < now() - $1::interval
				LIMIT $2)`, olderThan, chunk)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < chunk {
			return total, nil
		}
	}
}
