package outbox

import (
	"context"
	"sync"
	"time"
)

// scheduler hands shards to relay workers. A shard is queued at most once and worked on
// by at most one worker of this relay; a wake-up that arrives while the shard is being
// worked on makes it run again afterwards, so no committed row waits for the sweep.
type scheduler struct {
	mu    sync.Mutex
	state [Shards]struct{ queued, running, dirty bool }
	ready chan int // capacity Shards: every shard fits, so mark never blocks
	taker chan struct{}
}

func newScheduler() *scheduler {
	return &scheduler{ready: make(chan int, Shards), taker: make(chan struct{}, 1)}
}

func (s *scheduler) mark(shard int) { s.markMany([]int{shard}) }

// markMany marks shards at once: a worker that wakes on the first one waits for the lock
// until all are queued, so it takes them together (one transaction) rather than alone.
func (s *scheduler) markMany(shards []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, shard := range shards {
		s.markLocked(shard)
	}
}

func (s *scheduler) markLocked(shard int) {
	st := &s.state[shard]
	switch {
	case st.running:
		st.dirty = true
	case !st.queued:
		st.queued = true
		s.ready <- shard
	}
}

func (s *scheduler) markAll() {
	all := make([]int, Shards)
	for i := range all {
		all[i] = i
	}
	s.markMany(all)
}

func (s *scheduler) markAfter(shard int, d time.Duration) {
	time.AfterFunc(d, func() { s.mark(shard) })
}

func (s *scheduler) take(ctx context.Context) (int, bool) {
	select {
	case <-ctx.Done():
		return 0, false
	case shard := <-s.ready:
		s.mu.Lock()
		s.state[shard].queued = false
		s.state[shard].running = true
		s.mu.Unlock()
		return shard, true
	}
}

// takeMany is take that also takes other queued shards, up to max in all, so that one
// transaction publishes them together. One worker at a time waits in it: the shards one
// poll marks go to one worker together instead of one to each worker waiting.
func (s *scheduler) takeMany(ctx context.Context, max int) ([]int, bool) {
	select {
	case s.taker <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	defer func() { <-s.taker }()
	first, ok := s.take(ctx)
	if !ok {
		return nil, false
	}
	shards := []int{first}
	for len(shards) < max {
		select {
		case shard := <-s.ready:
			s.mu.Lock()
			s.state[shard].queued = false
			s.state[shard].running = true
			s.mu.Unlock()
			shards = append(shards, shard)
		default:
			return shards, true
		}
	}
	return shards, true
}

func (s *scheduler) finish(shard int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.state[shard]
	st.running = false
	if st.dirty {
		st.dirty = false
		st.queued = true
		s.ready <- shard
	}
}
