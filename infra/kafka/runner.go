package kafka

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/metrics"
)

// Handler processes one record. Returning nil marks the record done; its offset may then
// be committed. Returning an error means "not done": the same record is retried with
// backoff, and nothing after it on its partition is processed or committed until it
// succeeds. An error from Unprocessable means the record can never be processed: the
// runner dead-letters it (DeadLetters) and, once it is stored there, moves past it as if
// done. Handlers must be idempotent (delivery is at least once) and should bound their
// own work with timeouts; ctx is cancelled when the runner shuts down.
type Handler func(ctx context.Context, r *kgo.Record) error

// RunnerOptions configures a Runner. Brokers, Group, Topics and Handler are required.
type RunnerOptions struct {
	Brokers []string
	Group   string
	Topics  []string
	Handler Handler

	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil = prometheus.DefaultRegisterer

	// KeyConcurrency is how many records of one partition may be handled at once, all of
	// them with different keys (default 1: one at a time). The worker takes the records at
	// the head of its queue up to the first whose key repeats one taken, so a key's records
	// are still handled in order, one after the other; the partition's offset moves past
	// them once every one of them is done, so the commit contract holds.
	KeyConcurrency int
	// BufferSize is how many polled records may wait per partition before the partition
	// is paused; it resumes once its worker has drained half of them. Default 256.
	BufferSize int
	// CommitEvery is how often processed offsets are committed; they are also committed
	// when partitions are revoked and on shutdown. Default 1s.
	CommitEvery time.Duration
	// RetryMin and RetryMax bound the backoff between attempts of a failing record.
	// Defaults 100ms and 10s.
	RetryMin, RetryMax time.Duration
	// LagEvery is how often the member measures the lag of the partitions it owns
	// (rental_kafka_consumer_lag_records): one ListOffsets and one OffsetFetch request.
	// Default 10s.
	LagEvery time.Duration
	// ClientOpts are appended to the client options (tests shorten heartbeats here).
	ClientOpts []kgo.Opt
}

// Runner consumes topics as one member of a consumer group with one goroutine per
// assigned partition, so records of a partition (and therefore of a key) are handled
// strictly in order while partitions proceed independently.
//
// Commit contract: the committed offset of a partition never passes a record whose handler
// has not returned nil. Offsets are committed periodically, before partitions are given up
// in a rebalance, and on clean shutdown, so a successor resumes right after the last
// processed record.
type Runner struct {
	o   RunnerOptions
	log *slog.Logger
	cl  *kgo.Client

	processed *prometheus.CounterVec
	failures  *prometheus.CounterVec
	lag       *prometheus.GaugeVec
	dead      *DeadLetters

	// commitMu orders periodic commits with revokes: a periodic commit never sends an
	// offset of a partition that was revoked meanwhile, which could rewind the commit of
	// the partition's next owner.
	commitMu sync.Mutex
	mu       sync.Mutex
	workers  map[tp]*worker
	ctx      context.Context // handler context; set by Run before the client joins
}

type tp struct {
	topic     string
	partition int32
}

// NewRunner validates the options; the runner joins the group in Run.
func NewRunner(o RunnerOptions) (*Runner, error) {
	switch {
	case len(o.Brokers) == 0:
		return nil, errors.New("kafka runner: no brokers")
	case o.Group == "":
		return nil, errors.New("kafka runner: no group")
	case len(o.Topics) == 0:
		return nil, errors.New("kafka runner: no topics")
	case o.Handler == nil:
		return nil, errors.New("kafka runner: no handler")
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 256
	}
	if o.KeyConcurrency <= 0 {
		o.KeyConcurrency = 1
	}
	if o.CommitEvery <= 0 {
		o.CommitEvery = time.Second
	}
	if o.RetryMin <= 0 {
		o.RetryMin = 100 * time.Millisecond
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(10*time.Second, o.RetryMin)
	}
	if o.LagEvery <= 0 {
		o.LagEvery = 10 * time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	r := &Runner{
		o:       o,
		log:     log.With("stage", "consumer", "group", o.Group),
		workers: map[tp]*worker{},
		processed: metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rental_kafka_records_processed_total",
			Help: "Records whose handler returned nil, by consumer group and topic.",
		}, []string{"group", "topic"})),
		failures: metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rental_kafka_handler_errors_total",
			Help: "Handler attempts that returned an error (each retry counts), by consumer group and topic.",
		}, []string{"group", "topic"})),
		lag: metrics.Register(o.Registerer, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "rental_kafka_consumer_lag_records",
			Help: "Records of a partition not yet processed by its consumer group (high watermark minus the next offset to process), reported by the member that owns the partition.",
		}, []string{"group", "topic", "partition"})),
		dead: NewDeadLetters(o.Group, o.Registerer),
	}
	return r, nil
}

func (r *Runner) clientOpts() []kgo.Opt {
	o := r.o
	return append([]kgo.Opt{
		kgo.ConsumerGroup(o.Group),
		kgo.ConsumeTopics(o.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// Rebalance callbacks never run between a poll and the hand-off of its records,
		// so a revoked partition's records can never reach a re-created worker.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
	}, o.ClientOpts...)
}

// Run joins the group and processes records until ctx is cancelled. On the way out it
// stops every partition worker after its current record, commits what was processed and
// leaves the group. It returns nil on a clean shutdown.
// Run may be called once.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.ctx != nil {
		r.mu.Unlock()
		return errors.New("kafka runner: Run called twice")
	}
	r.ctx = ctx
	r.mu.Unlock()
	// The client joins the group as soon as it exists, so it is created only now that
	// the callbacks have a context for their workers.
	cl, err := NewClient(r.o.Brokers, r.clientOpts()...)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.cl = cl
	r.mu.Unlock()
	r.log.Info("consumer up", "topics", r.o.Topics, "brokers", r.o.Brokers)

	commitDone := make(chan struct{})
	go func() {
		defer close(commitDone)
		t := time.NewTicker(r.o.CommitEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				r.commitMu.Lock()
				r.commit(ctx, r.snapshot(nil))
				r.commitMu.Unlock()
			}
		}
	}()

	lagDone := make(chan struct{})
	go func() {
		defer close(lagDone)
		metrics.Sample(ctx, r.o.LagEvery, r.log, "consumer lag", r.measureLag)
	}()

	runErr := Poll(ctx, r.cl, r.log, func(topic string, partition int32, records []*kgo.Record) {
		r.mu.Lock()
		w := r.workers[tp{topic, partition}]
		r.mu.Unlock()
		if w != nil {
			w.push(records)
		}
	})
	<-commitDone
	<-lagDone

	// Shutdown: stop every worker, then commit with a fresh context (ctx is done).
	r.mu.Lock()
	all := make([]*worker, 0, len(r.workers))
	for _, w := range r.workers {
		all = append(all, w)
	}
	r.mu.Unlock()
	stopAll(all)
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	r.commitMu.Lock()
	r.commit(cctx, r.snapshot(all))
	r.commitMu.Unlock()
	cancel()
	for _, w := range all {
		r.forgetLag(w.k)
	}
	r.cl.CloseAllowingRebalance()
	r.log.Info("consumer stopped")
	return runErr
}

// PausedPartitions lists partitions currently paused because their worker is behind (for
// status pages and tests).
// It is empty before Run.
func (r *Runner) PausedPartitions() map[string][]int32 {
	r.mu.Lock()
	cl := r.cl
	r.mu.Unlock()
	if cl == nil {
		return nil
	}
	return cl.PauseFetchPartitions(nil)
}

func (r *Runner) assigned(_ context.Context, _ *kgo.Client, got map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t, ps := range got {
		for _, p := range ps {
			k := tp{t, p}
			if _, ok := r.workers[k]; ok {
				continue
			}
			w := newWorker(r, k)
			r.workers[k] = w
			go w.run(r.ctx)
		}
	}
	r.log.Info("partitions assigned", "partitions", got)
}

// revoked stops the workers of the revoked partitions and commits what they processed
// before the group hands the partitions to another member.
func (r *Runner) revoked(ctx context.Context, _ *kgo.Client, gone map[string][]int32) {
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	ws := r.detach(gone)
	stopAll(ws)
	r.commit(ctx, r.snapshot(ws))
	if len(gone) > 0 {
		r.log.Info("partitions revoked", "partitions", gone)
	}
}

// lost is like revoked, but the member is already out of the group, so the commit is
// expected to fail; the next owner reprocesses from the last commit (at least once).
func (r *Runner) lost(ctx context.Context, _ *kgo.Client, gone map[string][]int32) {
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	ws := r.detach(gone)
	stopAll(ws)
	r.commit(ctx, r.snapshot(ws))
	r.log.Warn("partitions lost", "partitions", gone)
}

func (r *Runner) detach(gone map[string][]int32) []*worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ws []*worker
	for t, ps := range gone {
		for _, p := range ps {
			k := tp{t, p}
			if w, ok := r.workers[k]; ok {
				ws = append(ws, w)
				delete(r.workers, k)
				r.forgetLag(k)
			}
		}
	}
	// A partition paused when revoked would stay paused if it came back to us.
	if len(gone) > 0 {
		r.cl.ResumeFetchPartitions(gone)
	}
	return ws
}

// pending is an offset to commit for one partition.
type pending struct {
	w  *worker
	at kgo.EpochOffset
}

// snapshot collects the processed-but-uncommitted offsets of ws (all workers when nil).
func (r *Runner) snapshot(ws []*worker) []pending {
	if ws == nil {
		r.mu.Lock()
		for _, w := range r.workers {
			ws = append(ws, w)
		}
		r.mu.Unlock()
	}
	var out []pending
	for _, w := range ws {
		w.mu.Lock()
		if w.done.Offset > w.committed.Offset {
			out = append(out, pending{w, w.done})
		}
		w.mu.Unlock()
	}
	return out
}

func (r *Runner) commit(ctx context.Context, ps []pending) {
	if len(ps) == 0 {
		return
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, p := range ps {
		if offsets[p.w.k.topic] == nil {
			offsets[p.w.k.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[p.w.k.topic][p.w.k.partition] = p.at
	}
	failed := CommitSync(ctx, r.cl, offsets)
	if failed != nil {
		// Not fatal: the offsets stay pending and the next commit carries them; a
		// successor that starts before then reprocesses a few records (at least once).
		r.log.Warn("offset commit failed", "err", failed)
		return
	}
	for _, p := range ps {
		p.w.mu.Lock()
		if p.at.Offset > p.w.committed.Offset {
			p.w.committed = p.at
		}
		p.w.mu.Unlock()
	}
}

func stopAll(ws []*worker) {
	for _, w := range ws {
		w.stop()
	}
	for _, w := range ws {
		<-w.exited
	}
}

// measureLag sets rental_kafka_consumer_lag_records for every partition this member owns:
// the partition's end offset minus the next offset to process (what the worker processed,
// or the group's committed offset when that is further, or the log start when there is
// neither yet). Revoked partitions lose their series, so each partition is reported by its
// current owner only and max/sum over replicas are meaningful.
func (r *Runner) measureLag(ctx context.Context) error {
	r.mu.Lock()
	cl := r.cl
	owned := make(map[tp]*worker, len(r.workers))
	for k, w := range r.workers {
		owned[k] = w
	}
	r.mu.Unlock()
	if cl == nil || len(owned) == 0 {
		return nil
	}
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, r.o.Topics...)
	if err != nil {
		return err
	}
	committed, err := adm.FetchOffsets(ctx, r.o.Group)
	if err != nil {
		return err
	}
	var starts kadm.ListedOffsets
	for k, w := range owned {
		end, ok := ends.Lookup(k.topic, k.partition)
		if !ok || end.Err != nil {
			continue
		}
		w.mu.Lock()
		pos := w.done.Offset
		w.mu.Unlock()
		if c, ok := committed.Lookup(k.topic, k.partition); ok && c.Err == nil && c.At > pos {
			pos = c.At
		}
		if pos < 0 {
			if starts == nil {
				if starts, err = adm.ListStartOffsets(ctx, r.o.Topics...); err != nil {
					return err
				}
			}
			s, ok := starts.Lookup(k.topic, k.partition)
			if !ok || s.Err != nil {
				continue
			}
			pos = s.Offset
		}
		r.mu.Lock()
		if r.workers[k] == w { // not revoked meanwhile: its series was not just deleted
			r.lag.WithLabelValues(r.o.Group, k.topic, strconv.Itoa(int(k.partition))).Set(float64(max(end.Offset-pos, 0)))
		}
		r.mu.Unlock()
	}
	return nil
}

func (r *Runner) forgetLag(k tp) {
	r.lag.DeleteLabelValues(r.o.Group, k.topic, strconv.Itoa(int(k.partition)))
}
