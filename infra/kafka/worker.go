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
		recs := w.head()
		w.mu.Unlock()
		if len(recs) == 0 {
			select {
			case <-w.wake:
				continue
			case <-w.quit:
				return
			case <-ctx.Done():
				return
			}
		}
		if !w.handleAll(ctx, recs, failures) {
			return // stopped while a record was still failing: it stays uncommitted
		}
		processed.Add(float64(len(recs)))
		last := recs[len(recs)-1]
		w.mu.Lock()
		clear(w.queue[:len(recs)])
		w.queue = w.queue[len(recs):]
		w.done = kgo.EpochOffset{Epoch: last.LeaderEpoch, Offset: last.Offset + 1}
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

// head is the records to handle next (w.mu held): the queue's head up to KeyConcurrency
// records, stopping before the first whose key repeats one of them.
func (w *worker) head() []*kgo.Record {
	n := min(len(w.queue), w.r.o.KeyConcurrency)
	if n <= 1 {
		return w.queue[:n]
	}
	seen := make(map[string]bool, n)
	for i, rec := range w.queue[:n] {
		if seen[string(rec.Key)] {
			return w.queue[:i]
		}
		seen[string(rec.Key)] = true
	}
	return w.queue[:n]
}

// handleAll handles recs (distinct keys) at once and reports whether every one of them
// was accepted (see handle).
func (w *worker) handleAll(ctx context.Context, recs []*kgo.Record, failures interface{ Inc() }) bool {
	if len(recs) == 1 {
		return w.handle(ctx, recs[0], failures)
	}
	ok := make([]bool, len(recs))
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = w.handle(ctx, rec, failures)
		}()
	}
	wg.Wait()
	for _, v := range ok {
		if !v {
			return false
		}
	}
	return true
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
