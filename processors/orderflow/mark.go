package orderflow

import (
	"context"
	"errors"
	"slices"
	"sync"

	"rental/infra/orderstore"
	"rental/schemas/orders"
)

// ---- broadcast marks in groups ----
//
// Once an order's delegations are broadcast, the node's answers go to the journal and the
// order moves to delegated with its hashes. Done for one order that is one statement per
// answer and a step of its own (lock, marks, commit): two commits per order after the
// broadcast. The orders whose broadcasts end at the same moment (each intent worker
// delivers one) are marked together instead: one transaction of two round trips records
// every answer, locks those of the orders still allocating, and moves each of them whose
// every delegation was accepted to delegated (markGroup). An order the group cannot mark
// (locked by a step of another replica, a delegation refused, a provider or an activation
// part, a block result already in) is left to its own step, which marks it as before; the
// answers are recorded either way. Nothing is broadcast here: the journal rows were
// committed before, so a crash between the broadcast and the mark only leaves the order
// allocating, due within RetryEvery, and its step broadcasts the same bytes again.

// maxMarkGroup bounds the orders of one mark transaction.
const maxMarkGroup = 64

// grouper runs the requests queued while groups run as the next group. A caller that finds
// fewer than groupsAtOnce groups running leads one group (the queue's head, up to max
// requests) in its own goroutine; requests still queued after it are led on by a goroutine
// of their own, so no caller is held up by others' groups beyond its own. A few groups at
// once keep one group's round trips and node calls from holding up the orders arriving
// meanwhile.
type grouper[R any] struct {
	mu      sync.Mutex
	queue   []*groupReq[R]
	running int
	atOnce  int // 0: groupsAtOnce
}

// groupsAtOnce bounds the groups of one kind a replica runs at the same time, unless the
// grouper sets its own bound (atOnce).
const groupsAtOnce = 4

type groupReq[R any] struct {
	r    R
	done chan struct{} // closed once a group holding the request ran
}

// do queues r and returns once a group holding it ran fn.
func (g *grouper[R]) do(r R, max int, fn func([]R)) {
	q := &groupReq[R]{r: r, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, q)
	limit := g.atOnce
	if limit <= 0 {
		limit = groupsAtOnce
	}
	lead := g.running < limit
	if lead {
		g.running++
	}
	g.mu.Unlock()
	if lead && g.runOne(max, fn) {
		go func() {
			for g.runOne(max, fn) {
			}
		}()
	}
	<-q.done
}

// runOne runs fn for the queue's head group (the caller holds one of the running slots);
// more reports that requests are left, for the caller to lead on with the slot (otherwise
// the slot is given back).
func (g *grouper[R]) runOne(max int, fn func([]R)) (more bool) {
	g.mu.Lock()
	n := min(len(g.queue), max)
	group := append([]*groupReq[R](nil), g.queue[:n]...)
	g.queue = g.queue[n:]
	g.mu.Unlock()
	defer func() {
		for _, m := range group {
			close(m.done)
		}
		g.mu.Lock()
		more = len(g.queue) > 0
		if !more {
			g.running--
		}
		g.mu.Unlock()
	}()
	if n > 0 {
		rs := make([]R, n)
		for i, m := range group {
			rs[i] = m.r
		}
		fn(rs)
	}
	return more
}

// markReq is one order's broadcast answers; written and marked are the group's outcome for it.
type markReq struct {
	orderID string
	sent    []orderstore.Sent
	written bool // the answers are recorded
	marked  bool // the order is delegated
}

// markSent records the node's answers to an order's broadcasts, and moves the order to
// delegated when they complete its delivery, together with the orders of concurrent
// callers. It reports whether the order was marked: if not, its own step takes it on (the
// answers are recorded in either case, or an error returned).
func (f *Flow) markSent(ctx context.Context, orderID string, sent []orderstore.Sent) (bool, error) {
	r := &markReq{orderID: orderID, sent: sent}
	f.marks.do(r, maxMarkGroup, func(rs []*markReq) {
		if err := f.markGroup(ctx, rs); err != nil && ctx.Err() == nil {
			f.log.Warn("group broadcast mark failed; each order records its own", "orders", len(rs), "err", err)
		}
	})
	if r.written {
		return r.marked, nil
	}
	var errs []error
	for _, s := range sent {
		if err := orderstore.SetSent(ctx, f.o.Pool, s.TxID, s.State, s.Result); err != nil {
			errs = append(errs, err)
		}
	}
	return false, errors.Join(errs...)
}

// markGroup is the transaction of one group (see above).
func (f *Flow) markGroup(ctx context.Context, rs []*markReq) error {
	var sent []orderstore.Sent
	ids := make([]string, 0, len(rs))
	for _, r := range rs {
		sent = append(sent, r.sent...)
		ids = append(ids, r.orderID)
	}
	c, err := f.o.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tx, m, err := orderstore.BeginMarks(ctx, c.Conn(), sent, ids)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	var fills []orderstore.FillTx
	var marked []string
	for _, r := range rs {
		st := m.Locked[r.orderID]
		if st == nil || slices.Contains(marked, r.orderID) {
			continue
		}
		fs, ok := delegatedFills(st)
		if !ok {
			continue
		}
		for _, fl := range fs {
			fl.OrderID = r.orderID
			fills = append(fills, fl)
		}
		marked = append(marked, r.orderID)
	}
	var w orderstore.Writes
	if len(marked) > 0 {
		w.MarkDelegatedMany(fills, marked, f.o.Now().Add(f.o.LandGrace))
	}
	if err := w.SendCommit(ctx, tx); err != nil {
		return err
	}
	for _, r := range rs {
		r.written = true
		r.marked = slices.Contains(marked, r.orderID)
	}
	f.transitions.WithLabelValues(string(orders.Delegated)).Add(float64(len(marked)))
	if len(marked) > 0 {
		f.markGroupSize.Observe(float64(len(marked)))
	}
	return nil
}

// delegatedFills decides for one locked order what the delivery step would: the order is
// delegated when every reserved fill is one of ours (pool or deep reserve) whose latest
// delegation the node accepted, with none of its delegations settled yet (a block result
// already in is the step's to apply: it settles at once). It returns those fills with
// their delegations, or false when the order is left to its step.
func delegatedFills(st *orderstore.MarkState) ([]orderstore.FillTx, bool) {
	var out []orderstore.FillTx
	for _, j := range st.Journal {
		if j.State != orderstore.JournalSigned && j.State != orderstore.JournalBroadcast {
			return nil, false
		}
	}
	for _, fl := range st.Fills {
		if fl.State != orderstore.FillReserved {
			if fl.State == orderstore.FillBroadcast {
				return nil, false // marked by an earlier step: the step finishes it
			}
			continue
		}
		if fl.Source != orderstore.SourcePool && fl.Source != orderstore.SourceDeep {
			return nil, false
		}
		var latest *orderstore.JournalState
		for i, j := range st.Journal {
			if j.FillSeq == fl.Seq && (latest == nil || j.Attempt > latest.Attempt) {
				latest = &st.Journal[i]
			}
		}
		if latest == nil || latest.State != orderstore.JournalBroadcast {
			return nil, false
		}
		out = append(out, orderstore.FillTx{Seq: fl.Seq, TxID: latest.TxID})
	}
	return out, len(out) > 0
}
