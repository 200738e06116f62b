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
}

func newScheduler() *scheduler { return &scheduler{ready: make(chan int, Shards)} }

func (s *scheduler) mark(shard int) {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	for i := range Shards {
		s.mark(i)
	}
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
// transaction publishes them together.
func (s *scheduler) takeMany(ctx context.Context, max int) ([]int, bool) {
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
