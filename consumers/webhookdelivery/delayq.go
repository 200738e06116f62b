package webhookdelivery

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
)

// delayConsumer consumes the retry topics. Each record is due at a time it carries; a
// partition's records are handled in offset order, and while the head record is not due
// the partition is PAUSED (no fetching) and its worker waits on a timer for exactly that
// time. The poll loop itself never waits on a due time, so every other partition keeps
// flowing. As with kafka.Runner, the committed offset never passes a record whose handler
// has not returned nil; a failing handler is retried with backoff (the partition stays
// paused meanwhile).
//
// It is not kafka.Runner because the runner cannot hold a partition paused for hours:
// there a handler that waits would block rebalances for as long as it waits, and one that
// refuses would be logged and counted as a failure every retry. Here a revoked worker
// stops its timer at once.
type delayConsumer struct {
	brokers []string
	group   string
	topics  []string
	due     func(*kgo.Record) time.Time
	handle  func(context.Context, *kgo.Record) error
	now     func() time.Time
	log     *slog.Logger
	extra   []kgo.Opt

	commitEvery time.Duration
	retryMin    time.Duration
	retryMax    time.Duration
	buffer      int

	commitMu sync.Mutex
	mu       sync.Mutex
	cl       *kgo.Client
	ctx      context.Context
	workers  map[tpart]*dworker
}

type tpart struct {
	topic     string
	partition int32
}

func (c *delayConsumer) Run(ctx context.Context) error {
	c.mu.Lock()
	c.ctx = ctx
	c.workers = map[tpart]*dworker{}
	c.mu.Unlock()
	cl, err := kafka.NewClient(c.brokers, append([]kgo.Opt{
		kgo.ConsumerGroup(c.group),
		kgo.ConsumeTopics(c.topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.assigned),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.revoked),
	}, c.extra...)...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.cl = cl
	c.mu.Unlock()

	commitDone := make(chan struct{})
	go func() {
		defer close(commitDone)
		t := time.NewTicker(c.commitEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				c.commitMu.Lock()
				c.commit(ctx, c.all())
				c.commitMu.Unlock()
			}
		}
	}()
	runErr := kafka.Poll(ctx, cl, c.log, func(topic string, partition int32, records []*kgo.Record) {
		c.mu.Lock()
		w := c.workers[tpart{topic, partition}]
		c.mu.Unlock()
		if w != nil {
			w.push(records)
		}
	})
	<-commitDone
	ws := c.all()
	stopWorkers(ws)
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c.commitMu.Lock()
	c.commit(cctx, ws)
	c.commitMu.Unlock()
	cancel()
	cl.CloseAllowingRebalance()
	return runErr
}

func (c *delayConsumer) all() []*dworker {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*dworker, 0, len(c.workers))
	for _, w := range c.workers {
		out = append(out, w)
	}
	return out
}

func (c *delayConsumer) assigned(_ context.Context, cl *kgo.Client, got map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, ps := range got {
		for _, p := range ps {
			k := tpart{t, p}
			if _, ok := c.workers[k]; ok {
				continue
			}
			cl.ResumeFetchPartitions(map[string][]int32{t: {p}}) // a new worker starts unpaused
			w := &dworker{c: c, k: k, done: -1, committed: -1,
				wake: make(chan struct{}, 1), quit: make(chan struct{}), exited: make(chan struct{})}
			c.workers[k] = w
			go w.run(c.ctx)
		}
	}
}

func (c *delayConsumer) revoked(ctx context.Context, cl *kgo.Client, gone map[string][]int32) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.mu.Lock()
	var ws []*dworker
	for t, ps := range gone {
		for _, p := range ps {
			if w, ok := c.workers[tpart{t, p}]; ok {
				ws = append(ws, w)
				delete(c.workers, tpart{t, p})
			}
		}
	}
	c.mu.Unlock()
	stopWorkers(ws)
	// After the workers stopped (one could pause again until then): a partition paused now
	// must not stay paused if it comes back.
	cl.ResumeFetchPartitions(gone)
	c.commit(ctx, ws)
}

func (c *delayConsumer) commit(ctx context.Context, ws []*dworker) {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	type pend struct {
		w  *dworker
		at int64
	}
	var ps []pend
	for _, w := range ws {
		w.mu.Lock()
		if w.done > w.committed {
			if offsets[w.k.topic] == nil {
				offsets[w.k.topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[w.k.topic][w.k.partition] = kgo.EpochOffset{Epoch: w.epoch, Offset: w.done}
			ps = append(ps, pend{w, w.done})
		}
		w.mu.Unlock()
	}
	if len(ps) == 0 {
		return
	}
	failed := kafka.CommitSync(ctx, c.cl, offsets)
	if failed != nil {
		c.log.Warn("offset commit failed; retried with the next commit", "err", failed)
		return
	}
	for _, p := range ps {
		p.w.mu.Lock()
		p.w.committed = max(p.w.committed, p.at)
		p.w.mu.Unlock()
	}
}

func stopWorkers(ws []*dworker) {
	for _, w := range ws {
		w.once.Do(func() { close(w.quit) })
	}
	for _, w := range ws {
		<-w.exited
	}
}

type dworker struct {
	c *delayConsumer
	k tpart

	mu        sync.Mutex
	queue     []*kgo.Record
	paused    bool
	done      int64 // next offset after the last handled record
	epoch     int32
	committed int64

	wake   chan struct{}
	quit   chan struct{}
	exited chan struct{}
	once   sync.Once
}

func (w *dworker) push(rs []*kgo.Record) {
	w.mu.Lock()
	w.queue = append(w.queue, rs...)
	if len(w.queue) >= w.c.buffer {
		w.pause()
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// pause and resume are called with mu held.
func (w *dworker) pause() {
	if !w.paused {
		w.paused = true
		w.c.cl.PauseFetchPartitions(map[string][]int32{w.k.topic: {w.k.partition}})
	}
}

func (w *dworker) resume() {
	if w.paused {
		w.paused = false
		w.c.cl.ResumeFetchPartitions(map[string][]int32{w.k.topic: {w.k.partition}})
	}
}

// wait returns false when the worker must stop.
func (w *dworker) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.quit:
		return false
	case <-w.c.ctx.Done():
		return false
	}
}

func (w *dworker) run(ctx context.Context) {
	defer close(w.exited)
	for {
		w.mu.Lock()
		var rec *kgo.Record
		if len(w.queue) > 0 {
			rec = w.queue[0]
		}
		w.mu.Unlock()
		if rec == nil {
			select {
			case <-w.wake:
				continue
			case <-w.quit:
				return
			case <-ctx.Done():
				return
			}
		}
		if wait := w.c.due(rec).Sub(w.c.now()); wait > 0 {
			w.mu.Lock()
			w.pause()
			w.mu.Unlock()
			if !w.wait(wait) {
				return
			}
			continue
		}
		backoff := w.c.retryMin
		for {
			err := w.c.handle(ctx, rec)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			w.c.log.Warn("retry record failed; trying it again", "topic", rec.Topic, "partition", rec.Partition,
				"offset", rec.Offset, "retry_in", backoff, "err", err)
			w.mu.Lock()
			w.pause()
			w.mu.Unlock()
			if !w.wait(backoff) {
				return
			}
			backoff = min(2*backoff, w.c.retryMax)
		}
		w.mu.Lock()
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.done, w.epoch = rec.Offset+1, rec.LeaderEpoch
		if len(w.queue) <= w.c.buffer/2 {
			w.resume()
		}
		w.mu.Unlock()
		select {
		case <-w.quit:
			return
		default:
		}
	}
}
