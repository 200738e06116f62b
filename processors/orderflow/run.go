package orderflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"rental/infra/chainstore"
	"rental/infra/kafka"
	"rental/infra/orderstore"
	"rental/schemas/events"
	"rental/schemas/orders"
	"rental/schemas/topics"
)

// factsPerPartition bounds the chain facts of one partition handled at once (facts are
// keyed by transaction, so one transaction's facts stay in order). Handled one at a time,
// a replica would confirm at most a partition count's facts per confirmation group's round
// trips, whatever the rate it delivers at (docs/order-processing.md); the facts that wait
// together form the confirmation groups.
const factsPerPartition = 16

// RunOptions configure the processor's inputs.
type RunOptions struct {
	Brokers []string
	// Group names the consumer groups ("<group>.intents" and "<group>.chain"; default
	// "orderflow"). Replicas share them: partitions are spread over the replicas.
	Group string
	// SweepEvery is how often due orders are claimed (default 250 ms).
	SweepEvery time.Duration
	// Workers bound how many due orders one replica advances at once (default 8).
	Workers int
	// IntentWorkers bound how many orders one replica delivers at once from intents
	// (default 64): an intent's record is done once its order is handed to a worker, so a
	// partition is not held up by each order's round trips and node calls, and the orders
	// of all partitions are allocated in groups (allocate.go). An order whose worker dies
	// with the replica is due 15 s after creation (or 30 s after allocation) and the
	// due-order sweep takes it up.
	IntentWorkers int
	// StatsEvery is how often the unsettled signer journal is read for its metrics
	// (default 5s).
	StatsEvery time.Duration
	// RelayEvery is how often relayed transactions are advanced (relay.go; default 200 ms:
	// a customer's call is broadcast within this of its delegation's block).
	RelayEvery time.Duration
	// ClientOpts are added to the Kafka clients (tests shorten timeouts).
	ClientOpts []kgo.Opt
}

// start checks the chain, registers the pools and makes due at once every order whose
// broadcast transaction is not yet in a block (orderstore.DueBroadcastNow).
func (f *Flow) start(ctx context.Context) error {
	if err := f.CheckChain(ctx); err != nil {
		return err
	}
	if err := f.RegisterPools(ctx); err != nil {
		return err
	}
	n, err := orderstore.DueBroadcastNow(ctx, f.o.Pool)
	if n > 0 {
		f.log.Info("orders with a broadcast transaction not yet in a block are due now", "orders", n)
	}
	return err
}

// Run consumes order intents and chain facts and sweeps due orders until ctx ends.
func (f *Flow) Run(ctx context.Context, ro RunOptions) error {
	if ro.Group == "" {
		ro.Group = "orderflow"
	}
	if ro.SweepEvery <= 0 {
		ro.SweepEvery = 250 * time.Millisecond
	}
	if ro.Workers <= 0 {
		ro.Workers = 8
	}
	if ro.RelayEvery <= 0 {
		ro.RelayEvery = 200 * time.Millisecond
	}
	if ro.IntentWorkers <= 0 {
		ro.IntentWorkers = 64
	}
	f.intentSlots = make(chan struct{}, ro.IntentWorkers)
	if ro.StatsEvery <= 0 {
		ro.StatsEvery = 5 * time.Second
	}
	if err := f.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: a shutdown, not a failure
		}
		return err
	}
	intents, err := kafka.NewRunner(kafka.RunnerOptions{
		Brokers: ro.Brokers, Group: ro.Group + ".intents", Topics: []string{topics.OrderIntents.Name},
		Handler: f.HandleIntent, Logger: f.log, Registerer: f.o.Registerer, ClientOpts: ro.ClientOpts,
	})
	if err != nil {
		return err
	}
	facts, err := kafka.NewRunner(kafka.RunnerOptions{
		Brokers: ro.Brokers, Group: ro.Group + ".chain", Topics: []string{topics.ChainFacts.Name},
		Handler: f.HandleFact, KeyConcurrency: factsPerPartition, Logger: f.log, Registerer: f.o.Registerer, ClientOpts: ro.ClientOpts,
	})
	if err != nil {
		return err
	}
	cap := f.lockCap.get(ctx, f.o.Node, f.o.Now())
	f.log.Info("order processor up", "pools", len(f.pools()), "group", ro.Group, "lock_policy", f.o.LockPolicy, "max_lock_blocks", cap)
	g, gctx := errgroup.WithContext(ctx)
	f.runCtx = gctx // intent workers outlive a partition's revocation, not the processor
	g.Go(func() error { return intents.Run(gctx) })
	g.Go(func() error { return facts.Run(gctx) })
	g.Go(func() error { return f.sweep(gctx, ro) })
	g.Go(func() error { f.journalMetrics(gctx, ro.StatsEvery); return nil })
	g.Go(func() error { return f.followRelays(gctx, ro.RelayEvery) }) // relay.go
	if f.o.Signers != nil {
		g.Go(func() error { f.o.Signers.Run(gctx); return nil }) // the pools' permissions, every minute
	}
	err = g.Wait()
	f.intentWork.Wait()
	f.log.Info("order processor stopped")
	return err
}

// HandleIntent advances the order an intent names.
func (f *Flow) HandleIntent(ctx context.Context, r *kgo.Record) error {
	var in orderstore.Intent
	if err := json.Unmarshal(r.Value, &in); err != nil || in.OrderID == "" {
		return kafka.Unprocessable(fmt.Errorf("order intent without an order id: %v", err)) // dead-lettered
	}
	work := func() {
		if in.Kind == orderstore.IntentProcess || in.Kind == "" {
			f.deliverNew(ctx, in.OrderID)
			return
		}
		f.advanceLogged(ctx, in.OrderID)
	}
	if f.intentSlots == nil { // not under Run (tests call the handler directly)
		work()
		return nil
	}
	select {
	case f.intentSlots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	f.intentWork.Add(1)
	ctx = f.runCtx
	go func() {
		defer f.intentWork.Done()
		defer func() { <-f.intentSlots }()
		work()
	}()
	return nil
}

// deliverNew takes an order waiting for its allocation through allocation and delivery
// with the other orders of the moment (allocate.go, delivergroup.go), and through its own
// step for whatever the groups leave to it.
func (f *Flow) deliverNew(ctx context.Context, orderID string) {
	f.allocateInGroup(ctx, orderID)
	if f.deliverInGroup(ctx, orderID) {
		return
	}
	f.advanceLogged(ctx, orderID)
}

// advanceLogged advances an order for a consumer. A failing step is not the record's
// fault: Advance has already made the order due again, and the due-order sweep retries it,
// so the record is done and its partition moves on (retrying it here would hold up every
// other order on the partition, for as long as the chain keeps refusing, say, an
// undelegation while a lock runs).
func (f *Flow) advanceLogged(ctx context.Context, orderID string) {
	if err := f.Advance(ctx, orderID); err != nil && ctx.Err() == nil {
		f.log.Warn("order step failed; retried when due", "order", orderID, "err", err)
	}
}

// HandleFact applies the block result of a journaled transaction, then advances its order.
func (f *Flow) HandleFact(ctx context.Context, r *kgo.Record) error {
	var fact events.ChainFact
	if err := json.Unmarshal(r.Value, &fact); err != nil {
		return kafka.Unprocessable(fmt.Errorf("not a chain fact: %w", err)) // dead-lettered
	}
	var orderID string
	var err error
	switch {
	case fact.Kind == events.FactTxResult:
		state := orderstore.JournalLanded
		if fact.Result != "SUCCESS" {
			state = orderstore.JournalFailed
		}
		// Normally the result is applied in the transaction of the step it advances (the
		// confirmation, usually): one commit for both. Should that step fail, the result is
		// applied on its own below and the order advanced as for any other wake-up.
		// With the facts that come with it when it can (confirmgroup.go).
		var handled bool
		if handled, err = f.confirmInGroup(ctx, orderstore.Fact{TxID: fact.TxID, State: state, Result: fact.Result,
			BlockNum: fact.BlockNum, BlockTime: time.Time(fact.BlockTime)}); handled || ctx.Err() != nil {
			return err
		}
		f.log.Warn("step on a chain fact failed; applying the fact on its own", "txid", fact.TxID, "err", err)
		// A row recorded dropped that lands all the same means a transaction was taken
		// for gone too early: record the truth and say so loudly (its step may have been
		// signed again).
		var was string
		orderID, was, err = orderstore.ApplyBlockResult(ctx, f.o.Pool, fact.TxID, state, fact.Result, fact.BlockNum, time.Time(fact.BlockTime))
		if err == nil && was == orderstore.JournalDropped {
			f.log.Error("a transaction recorded as dropped landed on chain; check the order's delegations", "txid", fact.TxID, "order", orderID)
		}
	case fact.Kind == events.FactRevert && fact.RevertedKind == events.FactTxResult:
		// The block was orphaned: the transaction is back to waiting for a block, unless
		// its order already moved on (then the new branch's fact settles it again).
		orderID, err = orderstore.RevertBlockResult(ctx, f.o.Pool, fact.TxID)
	default:
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		// Not ours, or applied before: still advance a known order, in case a crash
		// came between applying the fact and advancing.
		orderID, err = orderstore.OrderOfTx(ctx, f.o.Pool, fact.TxID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("apply chain fact %s: %w", fact.FactID, err)
	}
	f.advanceLogged(ctx, orderID)
	return nil
}

// stepOnFact applies a transaction's block result inside the first step of its order
// (orderstore.BeginLockedOnFact) and advances the order from there. handled reports that
// the result is applied and the order advanced (an error then is the order's, already
// rescheduled like Advance does, or the fact is not ours); false leaves both to the caller.
func (f *Flow) stepOnFact(ctx context.Context, fact orderstore.Fact) (handled bool, err error) {
	c, err := f.o.Pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	tx, l, applied, err := orderstore.BeginLockedOnFact(ctx, c.Conn(), fact.TxID, fact.State, fact.Result, fact.BlockNum, fact.BlockTime)
	if err != nil {
		c.Release()
		if errors.Is(err, orderstore.ErrNotFound) {
			return true, nil // not a transaction of ours
		}
		return false, err
	}
	more, after, err := f.dispatch(ctx, tx, l.Row, &loaded{journal: l.Journal, fills: l.Fills})
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		c.Release()
		return false, err
	}
	c.Release()
	orderID := l.Row.ID
	if applied.Done && applied.Was == orderstore.JournalDropped {
		// A row recorded dropped that lands all the same means a transaction was taken
		// for gone too early: record the truth and say so loudly (its step may have been
		// signed again).
		f.log.Error("a transaction recorded as dropped landed on chain; check the order's delegations", "txid", fact.TxID, "order", orderID)
	}
	if after != nil {
		if more, err = after(ctx); err != nil {
			f.stepErrors.Inc()
			f.reschedule(ctx, orderID, f.o.RetryEvery)
			if ctx.Err() == nil {
				f.log.Warn("order step failed; retried when due", "order", orderID, "err", err)
			}
			return true, nil
		}
	}
	if more {
		f.advanceLogged(ctx, orderID)
	}
	return true, nil
}

// sweep claims due orders (timers: confirmation deadlines, expiry, retries) and advances
// them. A claim pushes next_due_at a lease ahead, so an order claimed by a replica that
// dies is taken up by another after the lease.
func (f *Flow) sweep(ctx context.Context, ro RunOptions) error {
	t := time.NewTicker(ro.SweepEvery)
	defer t.Stop()
	sem := make(chan struct{}, ro.Workers)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		due, err := f.claimDue(ctx, ro.Workers*4)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			f.log.Warn("claiming due orders failed", "err", err)
			continue
		}
		for _, d := range due {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				if d.Status == orders.Created || d.Status == orders.Paid {
					// Still waiting for its allocation (its intent is queued behind a
					// backlog, or its worker died): with the others of the moment, as an
					// intent would take it, not one by one.
					f.deliverNew(ctx, d.ID)
					return
				}
				if err := f.Advance(ctx, d.ID); err != nil && ctx.Err() == nil {
					f.log.Warn("due order step failed; it is due again shortly", "order", d.ID, "err", err)
				}
			}()
		}
	}
}

// claimDue takes up to n orders whose next_due_at has passed.
func (f *Flow) claimDue(ctx context.Context, n int) ([]orderstore.Due, error) {
	now := f.o.Now()
	return orderstore.ClaimDue(ctx, f.o.Pool, now, now.Add(30*time.Second), n)
}

// CheckChain refuses a node of another chain than the one the chain follower stored with
// its cursor (genesis block id and network; docs/chain.md): delegating from the pools on
// the wrong chain would strand every order. Before the follower stored an identity there
// is nothing to compare, and the follower does the first check itself.
func (f *Flow) CheckChain(ctx context.Context) error {
	stored, ok, err := chainstore.StoredIdentity(ctx, f.o.Pool)
	if err != nil || !ok {
		return err
	}
	genesis, err := f.o.Node.GetBlockByNum(ctx, 0)
	if err != nil {
		return fmt.Errorf("orderflow: the node's genesis block: %w", err)
	}
	if node := (chainstore.Identity{GenesisID: genesis.BlockID, Network: string(f.o.Network)}); node != stored {
		return &chainstore.IdentityError{Stored: stored, Node: node}
	}
	return nil
}
