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

	"rental/infra/kafka"
	"rental/infra/orderstore"
	"rental/schemas/events"
	"rental/schemas/topics"
)

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
	// StatsEvery is how often the unsettled signer journal is read for its metrics
	// (default 5s).
	StatsEvery time.Duration
	// ClientOpts are added to the Kafka clients (tests shorten timeouts).
	ClientOpts []kgo.Opt
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
	if ro.StatsEvery <= 0 {
		ro.StatsEvery = 5 * time.Second
	}
	if err := f.RegisterPools(ctx); err != nil {
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
		Handler: f.HandleFact, Logger: f.log, Registerer: f.o.Registerer, ClientOpts: ro.ClientOpts,
	})
	if err != nil {
		return err
	}
	f.log.Info("order processor up", "pools", len(f.o.Pools), "group", ro.Group)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return intents.Run(gctx) })
	g.Go(func() error { return facts.Run(gctx) })
	g.Go(func() error { return f.sweep(gctx, ro) })
	g.Go(func() error { f.journalMetrics(gctx, ro.StatsEvery); return nil })
	err = g.Wait()
	f.log.Info("order processor stopped")
	return err
}

// HandleIntent advances the order an intent names.
func (f *Flow) HandleIntent(ctx context.Context, r *kgo.Record) error {
	var in orderstore.Intent
	if err := json.Unmarshal(r.Value, &in); err != nil || in.OrderID == "" {
		return kafka.Unprocessable(fmt.Errorf("order intent without an order id: %v", err)) // dead-lettered
	}
	f.advanceLogged(ctx, in.OrderID)
	return nil
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
		ids, err := f.claimDue(ctx, ro.Workers*4)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			f.log.Warn("claiming due orders failed", "err", err)
			continue
		}
		for _, id := range ids {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				if err := f.Advance(ctx, id); err != nil && ctx.Err() == nil {
					f.log.Warn("due order step failed; it is due again shortly", "order", id, "err", err)
				}
			}()
		}
	}
}

// claimDue takes up to n orders whose next_due_at has passed.
func (f *Flow) claimDue(ctx context.Context, n int) ([]string, error) {
	now := f.o.Now()
	return orderstore.ClaimDue(ctx, f.o.Pool, now, now.Add(30*time.Second), n)
}
