package orderflow

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"

	"rental/infra/chainstore"
	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/orders"
)

// ---- delivery in groups ----
//
// The orders an intent worker has just allocated are delivered together as well: one read
// finds those of them still waiting for their delegations, the node builds each fill's
// delegation (checked and signed as sign does) while no connection or lock is held, and
// one transaction locks the orders, keeps those that still read the same, journals their
// delegations with the chain follower's tracking and commits, in two round trips; then
// each worker broadcasts its order's delegations and hands the answers to the group
// broadcast mark (mark.go).
// The journal's rule holds as for one order: nothing is broadcast before the transaction
// that stores it committed, and the journal's unique step (order, purpose, fill, attempt)
// makes a second signature of a fill fail the whole group's transaction. An order the
// group does not take (locked by a step elsewhere, a delegation journaled before, a
// provider or a deep-reserve fill, an activation, a build that failed) is left to its own
// step, which delivers it as before, with every rule of deliver.go.

// maxDeliverGroup bounds the orders of one delivery transaction.
const maxDeliverGroup = 64

// buildConcurrency bounds the node calls one group makes at once.
const buildConcurrency = 16

// signedOrder is an order's delegations as the group signed them, with their journal
// entries as they will read back.
type signedOrder struct {
	signed []orderstore.Signed
	js     []orderstore.JournalEntry
}

type deliverReq struct {
	orderID string
	pending []orderstore.JournalEntry // signed and journaled by the group: to broadcast
}

// deliverInGroup delivers the order with those of concurrent callers when the group can
// (see above) and reports whether the order was delegated and marked: then nothing more is
// to be done for it now. Otherwise its step goes on as usual (what the group committed, a
// journaled delegation, is the step's to broadcast).
func (f *Flow) deliverInGroup(ctx context.Context, orderID string) bool {
	if !f.hasPools() {
		return false
	}
	r := &deliverReq{orderID: orderID}
	f.delivers.do(r, maxDeliverGroup, func(rs []*deliverReq) {
		if err := f.deliverGroup(ctx, rs); err != nil && ctx.Err() == nil {
			f.log.Warn("group delivery failed; each order delivers itself", "orders", len(rs), "err", err)
		}
	})
	if len(r.pending) == 0 {
		return false
	}
	more, err := f.broadcastAndMark(orderID, r.pending)(ctx)
	if err != nil {
		f.stepErrors.Inc()
		if ctx.Err() == nil {
			f.log.Warn("broadcast after the group delivery failed; the order's step sends it again", "order", orderID, "err", err)
		}
		return false
	}
	return !more
}

// deliverGroup is the transaction of one group. The delegations are built and signed
// before the transaction takes its connection (from an unlocked read of the orders), so
// that the node calls hold neither a connection nor a lock; under the locks an order is
// kept only when it still reads the same (allocating, nothing journaled, the same fills).
// A delegation built for an order that is not kept was neither stored nor broadcast.
func (f *Flow) deliverGroup(ctx context.Context, rs []*deliverReq) error {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.orderID
	}
	cand, err := orderstore.DeliveryCandidates(ctx, f.o.Pool, ids)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	out := map[string]*signedOrder{}
	sem := make(chan struct{}, buildConcurrency)
	var wg sync.WaitGroup
	for _, o := range cand.Rows {
		fs := cand.Fills[o.ID]
		if cand.Journaled[o.ID] || !groupDeliverable(o, fs) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			b, err := f.buildOrder(ctx, o, fs)
			if err != nil {
				return // its own step builds it, with deliver.go's handling of the error
			}
			mu.Lock()
			out[o.ID] = b
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(out) == 0 {
		return nil
	}
	built := make([]string, 0, len(out))
	for id := range out {
		built = append(built, id)
	}
	c, err := f.o.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tx, d, err := orderstore.BeginDeliveries(ctx, c.Conn(), built)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	keep := map[string]*signedOrder{}
	for _, o := range d.Rows {
		if b := out[o.ID]; b != nil && !d.Journaled[o.ID] && slices.Equal(d.Fills[o.ID], cand.Fills[o.ID]) {
			keep[o.ID] = b
		}
	}
	if len(keep) == 0 {
		return tx.Rollback(ctx)
	}
	var w orderstore.Writes
	var txids []string
	for _, b := range keep {
		for _, s := range b.signed {
			if err := w.Signed(s); err != nil {
				return err
			}
			txids = append(txids, s.Tx.TxID)
		}
	}
	w.With(func(b *pgx.Batch) { chainstore.QueueTrack(b, txids...) })
	// The orders keep the due time allocation gave them (30 s on): a crash before the
	// broadcast or its mark leaves them to the due-order sweep then, and a broadcast that
	// fails goes on in the order's own step at once (deliverInGroup). Moving it nearer
	// would cost every order one more update of its row (docs/order-processing.md).
	if err := w.SendCommit(ctx, tx); err != nil {
		return err
	}
	f.deliverGroupSize.Observe(float64(len(keep)))
	for _, r := range rs {
		if b := keep[r.orderID]; b != nil && r.pending == nil {
			r.pending = b.js
		}
	}
	return nil
}

// groupDeliverable reports whether the group can deliver the order: every fill a reserved
// fill of our pools.
func groupDeliverable(o orderstore.Row, fs []orderstore.Fill) bool {
	if len(fs) == 0 || (o.Resource != orders.Energy && o.Resource != orders.Bandwidth) {
		return false
	}
	for _, fl := range fs {
		if fl.State != orderstore.FillReserved || fl.Source != orderstore.SourcePool {
			return false
		}
	}
	return true
}

// buildOrder has the node build, and signs, the first attempt of every fill's delegation.
func (f *Flow) buildOrder(ctx context.Context, o orderstore.Row, fs []orderstore.Fill) (*signedOrder, error) {
	receiver, err := tron.ParseAddress(o.Receiver)
	if err != nil {
		return nil, err
	}
	b := &signedOrder{}
	for _, fl := range fs {
		intent, build, err := f.delegation(ctx, o, fl, receiver)
		if err != nil {
			return nil, err
		}
		s, j, err := f.signTx(ctx, o, orderstore.PurposeDelegate, fl.Seq, 0, intent, build)
		if err != nil {
			return nil, err
		}
		b.signed, b.js = append(b.signed, s), append(b.js, j)
	}
	if len(b.signed) == 0 {
		return nil, errors.New("nothing to sign")
	}
	return b, nil
}
