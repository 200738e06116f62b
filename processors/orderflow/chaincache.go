package orderflow

import (
	"context"
	"sync"
	"time"

	"rental/infra/tron"
)

// Allocation holds the pools' row locks, so every node call it makes is time during which
// no other order of any replica can be allocated. chainCache keeps the two reads it needs
// for a short while: the network's weights (they move slowly, and the delegation margin
// covers the drift) and each pool's delegatable balance. A cached balance is safe because
// allocation counts as in flight every fill that landed after the balance was read.
type chainCache struct {
	ttl time.Duration

	mu     sync.Mutex
	res    *tron.AccountResource
	resAt  time.Time
	byPool map[poolResource]poolRead
}

type poolResource struct {
	pool tron.Address
	res  tron.ResourceCode
}

type poolRead struct {
	sun int64
	at  time.Time
}

// clockMargin covers the difference between this process's clock (cache times) and the
// database's (fill updated_at): fills that landed this much before a read still count.
const clockMargin = 2 * time.Second

func newChainCache(ttl time.Duration) *chainCache {
	return &chainCache{ttl: ttl, byPool: map[poolResource]poolRead{}}
}

func (c *chainCache) weights(ctx context.Context, node Node, any tron.Address, now time.Time) (*tron.AccountResource, error) {
	c.mu.Lock()
	if c.res != nil && now.Sub(c.resAt) < c.ttl {
		r := c.res
		c.mu.Unlock()
		return r, nil
	}
	c.mu.Unlock()
	r, err := node.GetAccountResource(ctx, any)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.res, c.resAt = r, now
	c.mu.Unlock()
	return r, nil
}

// delegatable returns the pool's delegatable balance and when it was read.
func (c *chainCache) delegatable(ctx context.Context, node Node, pool tron.Address, res tron.ResourceCode, now time.Time) (int64, time.Time, error) {
	k := poolResource{pool, res}
	c.mu.Lock()
	if r, ok := c.byPool[k]; ok && now.Sub(r.at) < c.ttl {
		c.mu.Unlock()
		return r.sun, r.at, nil
	}
	c.mu.Unlock()
	sun, err := node.GetCanDelegatedMaxSize(ctx, pool, res)
	if err != nil {
		return 0, time.Time{}, err
	}
	c.mu.Lock()
	c.byPool[k] = poolRead{sun: sun, at: now}
	c.mu.Unlock()
	return sun, now, nil
}

// lockCap is the chain's getMaxDelegateLockPeriod (blocks), which a proposal can raise:
// read at start (Run) and again when older than lockCapTTL; the network's documented
// value stands in until the node has answered.
type lockCap struct {
	mu     sync.Mutex
	blocks int64
	at     time.Time
}

const lockCapTTL = 10 * time.Minute

func newLockCap(def int64) *lockCap { return &lockCap{blocks: def} }

// get returns the cap, refreshing it from the node when stale; a node that does not answer
// leaves the last value in place.
func (l *lockCap) get(ctx context.Context, node Node, now time.Time) int64 {
	l.mu.Lock()
	fresh := !l.at.IsZero() && now.Sub(l.at) < lockCapTTL
	v := l.blocks
	l.mu.Unlock()
	if fresh {
		return v
	}
	p, err := node.GetChainParameters(ctx)
	if err != nil {
		return v
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n, ok := p.Get("getMaxDelegateLockPeriod"); ok && n > 0 {
		l.blocks = n
	}
	l.at = now
	return l.blocks
}
