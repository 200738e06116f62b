package webhookdelivery

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// dispatcher runs the drives of ordering keys (the HTTP attempts) off the Kafka partition
// workers, so that a slow or dead endpoint holds up nothing but its own account's keys.
//
//   - At most one drive per ordering key runs at a time in this process; work that arrives
//     for a key while it is being driven (a new event, a wake-up) is merged into that drive
//     and handled when it is done, in arrival order.
//   - At most maxDrives drives run at once, and at most perAccount of them for one
//     account; an account's further keys wait in its own line, so an account whose
//     endpoint is slow fills its share of the pool and never the rest.
//   - Nothing it holds is state: every key it is told about is durably in webhook_queue
//     already (the handlers enqueue before they submit, and the retry state is committed
//     before its wake-up is due). A key it drops (its account's line is full) or forgets
//     (the process dies) is found again by the sweep of overdue queue heads.
type dispatcher struct {
	drive      func(ctx context.Context, accountID, okey string, steps []step) error
	maxDrives  int
	perAccount int
	maxWaiting int // per account, keys waiting for the account's share beyond which new ones are dropped
	log        *slog.Logger

	mu      sync.Mutex
	ctx     context.Context
	keys    map[keyID]*keyJob
	accts   map[string]*acctLine
	ready   []*keyJob // admitted by their account, waiting for a free drive
	running int
	wg      sync.WaitGroup
}

type keyID struct{ account, okey string }

type keyJob struct {
	id      keyID
	steps   []step // wake-up steps to try first, in arrival order
	running bool
	again   bool // work arrived while running: look at the key once more
}

type acctLine struct {
	active  int       // keys of the account ready or running
	waiting []*keyJob // keys beyond the account's share
}

func newDispatcher(maxDrives, perAccount, maxWaiting int, log *slog.Logger,
	drive func(ctx context.Context, accountID, okey string, steps []step) error) *dispatcher {
	return &dispatcher{drive: drive, maxDrives: maxDrives, perAccount: perAccount, maxWaiting: maxWaiting, log: log,
		keys: map[keyID]*keyJob{}, accts: map[string]*acctLine{}}
}

// start sets the context of the drives; submit does nothing before it or after ctx ends.
func (p *dispatcher) start(ctx context.Context) {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
}

// wait returns when every drive has returned (after ctx ended).
func (p *dispatcher) wait() { p.wg.Wait() }

// submit asks for the key to be driven: from s (a due wake-up) if not nil, else from its
// head. It never blocks on I/O. It reports false when the key was dropped (its account's
// line is full, or the dispatcher is stopping); the sweep finds it again.
func (p *dispatcher) submit(accountID, okey string, s *step) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil || p.ctx.Err() != nil {
		return false
	}
	id := keyID{accountID, okey}
	if j := p.keys[id]; j != nil {
		if s != nil {
			j.steps = append(j.steps, *s)
		}
		if j.running {
			j.again = true
		}
		return true
	}
	a := p.accts[accountID]
	if a == nil {
		a = &acctLine{}
		p.accts[accountID] = a
	}
	if a.active >= p.perAccount && len(a.waiting) >= p.maxWaiting {
		return false
	}
	j := &keyJob{id: id}
	if s != nil {
		j.steps = []step{*s}
	}
	p.keys[id] = j
	if a.active < p.perAccount {
		a.active++
		p.ready = append(p.ready, j)
		p.pump()
	} else {
		a.waiting = append(a.waiting, j)
	}
	return true
}

// reserve takes a drive for a key that is not known here, when one is free for it at once
// (nobody waits before it); nil otherwise. The caller must launch the job it returns.
// The handler of a new event uses it to queue the event with its first attempt claimed
// already, knowing the attempt starts at once.
func (p *dispatcher) reserve(accountID, okey string) *keyJob {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := keyID{accountID, okey}
	if p.ctx == nil || p.ctx.Err() != nil || p.keys[id] != nil || p.running >= p.maxDrives || len(p.ready) > 0 {
		return nil
	}
	a := p.accts[accountID]
	if a == nil {
		a = &acctLine{}
		p.accts[accountID] = a
	}
	if a.active >= p.perAccount {
		return nil
	}
	j := &keyJob{id: id, running: true}
	p.keys[id] = j
	a.active++
	p.running++
	p.wg.Add(1)
	return j
}

// launch starts a reserved job: first (if not nil) is its first piece of work instead of
// a drive of the key's head; what was submitted for the key meanwhile follows.
func (p *dispatcher) launch(j *keyJob, first func(context.Context) error) {
	go p.exec(p.ctx, j, first)
}

// pump starts ready keys while drives are free; called with mu held.
func (p *dispatcher) pump() {
	for p.running < p.maxDrives && len(p.ready) > 0 {
		j := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		j.running = true
		p.running++
		p.wg.Add(1)
		go p.exec(p.ctx, j, nil)
	}
}

// exec drives one key until nothing more arrived for it, then gives its place up.
func (p *dispatcher) exec(ctx context.Context, j *keyJob, first func(context.Context) error) {
	defer p.wg.Done()
	backoff := 100 * time.Millisecond
	var retrying []step
	failures := 0
	for {
		var err error
		var steps []step
		if first != nil {
			// What was submitted for the key meanwhile set again and waits for the next round.
			err, first = first(ctx), nil
		} else {
			p.mu.Lock()
			steps = append(retrying, j.steps...)
			j.steps, j.again = nil, false
			p.mu.Unlock()
			err = p.drive(ctx, j.id.account, j.id.okey, steps)
		}
		retrying = nil
		if err != nil && ctx.Err() == nil {
			failures++
			// A failure leaves the key where it was (queued, maybe leased); try again a few
			// times, then leave it to the sweep.
			if failures <= 5 {
				if !errors.Is(err, errBehind) {
					p.log.Warn("webhook delivery step failed; trying it again", "account_id", j.id.account,
						"okey", j.id.okey, "retry_in", backoff, "err", err)
				}
				if sleep(ctx, backoff) {
					retrying = steps
					backoff = min(2*backoff, 5*time.Second)
					continue
				}
			} else {
				p.log.Warn("webhook delivery step keeps failing; the sweep of due deliveries takes it up again",
					"account_id", j.id.account, "okey", j.id.okey, "err", err)
			}
		} else {
			failures, backoff = 0, 100*time.Millisecond
		}
		p.mu.Lock()
		if j.again && ctx.Err() == nil {
			p.mu.Unlock()
			continue
		}
		delete(p.keys, j.id)
		p.running--
		a := p.accts[j.id.account]
		a.active--
		if len(a.waiting) > 0 {
			next := a.waiting[0]
			a.waiting[0] = nil
			a.waiting = a.waiting[1:]
			a.active++
			p.ready = append(p.ready, next)
		}
		if a.active == 0 && len(a.waiting) == 0 {
			delete(p.accts, j.id.account)
		}
		if ctx.Err() == nil {
			p.pump()
		}
		p.mu.Unlock()
		return
	}
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
