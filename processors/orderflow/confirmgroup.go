package orderflow

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/ledgerstore"
	"rental/infra/orderstore"
	"rental/infra/outbox"
	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/orders"
)

// ---- confirmation in groups ----
//
// One block confirms many delegations, and chainwatch writes their chain facts together,
// so they reach this replica's partition workers at the same moment. Those facts are
// applied and their orders confirmed in one transaction: BEGIN, the orders' locks
// (skipping any a step holds), every fact's block result, the orders' journals and fills
// in one round trip; the receivers' delegations verified on chain for every order before
// anything is written that other work waits on (the ledger's account rows); then, in one
// round trip, the fills' new states, the captures and lifetime totals of every order (the
// accounts' rows locked in account order), the orders made active; and in a second, their
// order.confirmed events and COMMIT. An order the group cannot confirm outright (a
// fill still waiting for its block, nothing landed, a receiver not showing the delegation
// yet, not delegated) is left to its own step, which the fact's worker runs as before; its
// fact is applied by the group either way, as ApplyBlockResult would. Should the group's
// transaction fail, nothing of it stays and every fact goes its own way.

// maxFactGroup bounds the facts of one confirmation transaction.
const maxFactGroup = 64

// factGroupsAtOnce bounds the confirmation groups a replica runs at once. The facts come
// from one worker per chain-facts partition (12), each waiting for its fact's group: with
// four groups at once, four of those callers found a free slot and stepped their fact
// alone, and the measured share of orders confirmed one by one was 58 %; with two, the
// other callers' facts queue into larger groups (docs/order-processing.md).
const factGroupsAtOnce = 2

type factReq struct {
	fact    orderstore.Fact
	alone   bool  // the group was this fact alone: handled and err are stepOnFact's
	handled bool  // applied, and its order advanced
	err     error // alone: stepOnFact's error
}

// confirmInGroup applies the fact and advances its order: with the facts of concurrent
// callers when they come together (one transaction confirms every order it can), or alone
// (stepOnFact) while fewer than factGroupsAtOnce groups run, the facts arriving meanwhile
// forming the next group. handled
// and err are stepOnFact's (an order the group left to its step is stepped alone
// afterwards).
func (f *Flow) confirmInGroup(ctx context.Context, fact orderstore.Fact) (handled bool, err error) {
	r := &factReq{fact: fact}
	f.facts.do(r, maxFactGroup, func(rs []*factReq) {
		if len(rs) == 1 {
			rs[0].alone = true
			rs[0].handled, rs[0].err = f.stepOnFact(ctx, rs[0].fact)
			return
		}
		if err := f.factGroup(ctx, rs); err != nil && ctx.Err() == nil {
			f.log.Warn("group confirmation failed; each fact is applied on its own", "facts", len(rs), "err", err)
		}
	})
	switch {
	case r.alone:
		return r.handled, r.err
	case r.handled:
		return true, nil
	}
	return f.stepOnFact(ctx, fact)
}

// confirmPlan is one order the group confirms.
type confirmPlan struct {
	o          orderstore.Row
	seqs       []int
	states     []string
	delivered  int64
	byPool     map[tron.Address]int64
	firstBlock *time.Time
	verified   bool
}

// factGroup is the transaction of one group.
func (f *Flow) factGroup(ctx context.Context, rs []*factReq) error {
	facts := make([]orderstore.Fact, len(rs))
	for i, r := range rs {
		facts[i] = r.fact
	}
	c, err := f.o.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tx, l, err := orderstore.BeginFacts(ctx, c.Conn(), facts)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit

	var plans []*confirmPlan
	for _, lo := range l.Orders {
		if p, ok := f.confirmable(lo); ok {
			plans = append(plans, p)
		}
	}
	// The receivers' delegations, read before any write of the ledger's rows.
	var wg sync.WaitGroup
	sem := make(chan struct{}, buildConcurrency)
	for _, p := range plans {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ok, err := f.verifyDelivered(ctx, p.o, p.byPool)
			p.verified = ok && err == nil // otherwise its own step looks again
		}()
	}
	wg.Wait()
	plans = slices.DeleteFunc(plans, func(p *confirmPlan) bool { return !p.verified })
	// Accounts in one order, so that two groups never wait on each other's ledger rows.
	slices.SortFunc(plans, func(a, b *confirmPlan) int {
		return cmp.Or(strings.Compare(a.o.AccountID, b.o.AccountID), strings.Compare(a.o.ID, b.o.ID))
	})
	var w orderstore.Writes
	var ids []string
	var seqs []int
	var states []string
	for _, p := range plans {
		for i := range p.seqs {
			ids, seqs, states = append(ids, p.o.ID), append(seqs, p.seqs[i]), append(states, p.states[i])
		}
	}
	if len(ids) > 0 {
		w.FillStates(ids, seqs, states)
	}
	if err := f.confirmMany(ctx, tx, &w, plans); err != nil {
		return err
	}
	confirmed := map[string]bool{}
	for _, p := range plans {
		confirmed[p.o.ID] = true
	}
	if len(confirmed) > 0 {
		f.factGroupSize.Observe(float64(len(confirmed)))
	}
	for _, txid := range l.WasDropped {
		f.log.Error("a transaction recorded as dropped landed on chain; check the order's delegations", "txid", txid, "order", l.OrderOf[txid])
	}
	for _, r := range rs {
		r.handled = confirmed[l.OrderOf[r.fact.TxID]]
	}
	return nil
}

// confirmMany is confirm for every order of plans, after the statements already in w, in
// two round trips whatever their number (three with partial refunds): the captures and
// lifetime totals (ledgerstore.QueueOrderCaptures), the orders made active, then their
// order.confirmed events with COMMIT. A capture that is not the plain case fails the
// group: its orders are confirmed one by one, where each case is told apart.
func (f *Flow) confirmMany(ctx context.Context, tx pgx.Tx, w *orderstore.Writes, plans []*confirmPlan) error {
	if len(plans) == 0 {
		return tx.Commit(ctx) // nothing to confirm: the facts BeginFacts applied, and w is empty
	}
	now := f.o.Now()
	n := len(plans)
	ids, ds, cs := make([]string, n), make([]orderstore.Delivery, n), make([]ledgerstore.OrderCapture, n)
	for i, p := range plans {
		ids[i], ds[i] = p.o.ID, deliveryOf(p.o, p.delivered, p.firstBlock, now)
		cs[i] = ledgerstore.OrderCapture{AccountID: p.o.AccountID, Ref: p.o.ID, AmountSun: p.o.ChargedAmountSun}
		if p.o.Resource == orders.Energy {
			cs[i].Energy = ds[i].Delivered
		}
	}
	var captures *ledgerstore.QueuedCaptures
	var qerr error
	w.With(func(b *pgx.Batch) { captures, qerr = f.o.Ledger.QueueOrderCaptures(b, cs) })
	if qerr != nil {
		return qerr
	}
	rows := w.ConfirmMany(ids, ds)
	if err := captures.Result(ctx, tx, w.Send(ctx, tx)); err != nil {
		return err
	}
	byID := map[string]orderstore.Row{}
	for _, r := range *rows {
		byID[r.ID] = r
	}
	envs := make([]events.Envelope, 0, n)
	for i, p := range plans {
		row, ok := byID[p.o.ID]
		if !ok {
			return fmt.Errorf("confirm %s: %w", p.o.ID, orderstore.ErrNotFound)
		}
		if err := f.refundPartial(ctx, tx, p.o, ds[i]); err != nil {
			return err
		}
		env, err := f.event(row, orders.EventConfirmed, row.Record.Confirmed())
		if err != nil {
			return err
		}
		envs = append(envs, env)
	}
	w.With(func(b *pgx.Batch) { qerr = outbox.QueueEvents(b, envs) })
	if qerr != nil {
		return qerr
	}
	if err := w.SendCommit(ctx, tx); err != nil {
		return err
	}
	for _, p := range plans {
		f.confirmed(p.o, now)
	}
	return nil
}

// confirmable decides for one locked order what settle would with its facts applied: the
// order is delegated, every broadcast fill's delegation has its block result, and something
// landed. It returns the fills' new states and what landed; false leaves the order to its
// step.
func (f *Flow) confirmable(lo orderstore.Locked) (*confirmPlan, bool) {
	o := lo.Row
	if o.Status != orders.Delegated || o.Resource == orders.Activation {
		return nil, false
	}
	p := &confirmPlan{o: o}
	fs := slices.Clone(lo.Fills)
	for i, fl := range fs {
		if fl.State != orderstore.FillBroadcast {
			continue
		}
		j, ok := latest(lo.Journal, orderstore.PurposeDelegate, fl.Seq)
		if !ok || !j.Settled() {
			return nil, false
		}
		state := orderstore.FillLanded
		if j.State != orderstore.JournalLanded || (j.Result != nil && *j.Result != "SUCCESS") {
			state = orderstore.FillFailed
		}
		p.seqs, p.states = append(p.seqs, fl.Seq), append(p.states, state)
		fs[i].State = state
	}
	p.delivered, p.byPool, p.firstBlock = f.landedTotals(fs, lo.Journal)
	return p, p.delivered > 0
}
