package kafka

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/schemas/topics"
)

// worker processes the records of one partition in order. The poll loop appends to its
// queue and pauses the partition when the queue is full; the worker resumes it once it has
// drained half. Fetching pauses, never the poll loop, so other partitions keep flowing
// while one is stuck on a failing record.
type worker struct {
	r *Runner
	k tp

	mu        sync.Mutex
	queue     []*kgo.Record
	paused    bool
	done      kgo.EpochOffset // next offset after the last record the handler accepted
	committed kgo.EpochOffset

	wake   chan struct{} // capacity 1: "the queue grew"
	quit   chan struct{}
	exited chan struct{}
	once   sync.Once
}

func newWorker(r *Runner, k tp) *worker {
	return &worker{
		r: r, k: k,
		done:      kgo.EpochOffset{Epoch: -1, Offset: -1},
		committed: kgo.EpochOffset{Epoch: -1, Offset: -1},
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		exited:    make(chan struct{}),
	}
}

func (w *worker) push(rs []*kgo.Record) {
	w.mu.Lock()
	w.queue = append(w.queue, rs...)
	if !w.paused && len(w.queue) >= w.r.o.BufferSize {
		w.paused = true
		w.r.cl.PauseFetchPartitions(map[string][]int32{w.k.topic: {w.k.partition}})
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stop asks the worker to exit after the record in hand; queued records are dropped (they
// are not committed, so the partition's next owner reads them again).
func (w *worker) stop() { w.once.Do(func() { close(w.quit) }) }

func (w *worker) run(ctx context.Context) {
	defer close(w.exited)
	topic := w.k.topic
	processed := w.r.processed.WithLabelValues(w.r.o.Group, topic)
	failures := w.r.failures.WithLabelValues(w.r.o.Group, topic)
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
		if !w.handle(ctx, rec, failures) {
			return // stopped while the record was still failing: it stays uncommitted
		}
		processed.Inc()
		w.mu.Lock()
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.done = kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset + 1}
		if w.paused && len(w.queue) <= w.r.o.BufferSize/2 {
			w.paused = false
			w.r.cl.ResumeFetchPartitions(map[string][]int32{w.k.topic: {w.k.partition}})
		}
		w.mu.Unlock()
		select {
		case <-w.quit:
			return
		default:
		}
	}
}

// handle runs the handler until it accepts rec (or rec is dead-lettered), backing off
// between attempts. It returns
// false if the worker was stopped (or the runner shut down) before that happened.
func (w *worker) handle(ctx context.Context, rec *kgo.Record, failures interface{ Inc() }) bool {
	delay := w.r.o.RetryMin
	for attempt := 1; ; attempt++ {
		err := w.r.o.Handler(ctx, rec)
		if err == nil {
			return true
		}
		if IsUnprocessable(err) {
			derr := w.r.dead.Write(ctx, w.r.cl, rec, err)
			if derr == nil {
				w.r.log.Error("record can never be processed; dead-lettered and committed past",
					"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset,
					"dead_letter_topic", topics.ConsumersDead.Name, "err", err)
				return true
			}
			err = fmt.Errorf("%w; %w", err, derr) // not stored: retried, never committed past
		}
		failures.Inc()
		if ctx.Err() != nil {
			return false
		}
		w.r.log.Warn("handler failed; retrying the same record",
			"topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset,
			"attempt", attempt, "retry_in", delay, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-w.quit:
			t.Stop()
			return false
		case <-ctx.Done():
			t.Stop()
			return false
		}
		delay = min(delay*2, w.r.o.RetryMax)
	}
}
