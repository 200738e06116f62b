// Package batchflow is the batch processor (docs/batches.md "Processing"): it places one
// order per pending batch receiver and records each receiver's outcome once its order is
// confirmed or failed; the outcome that closes the last open receiver ends the batch and
// writes batch.completed (infra/batchstore.Resolve).
//
// Placement: in one transaction a replica locks one due pending receiver (FOR UPDATE SKIP
// LOCKED, so replicas share a batch and never take the same receiver), places its order
// through the Placer inside a savepoint, and records the result on the receiver. The
// order's client_order_id is derived from the batch and the receiver's index, and a
// placement that finds that order already there (acceptance.ErrPlacedBefore) places nothing new, so a
// replica killed at any point can neither lose a receiver nor place one twice.
//
// Outcomes: the order events consumer (events.orders.v1, one consumer group) resolves the
// receiver of every order.confirmed and order.failed; a sweep resolves receivers whose
// order is decided but whose event has not been handled (a slow or stopped consumer). Both
// read the order row and apply the outcome under the receiver's state guard, so a
// redelivered event or a second replica changes nothing.
package batchflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"rental/infra/acceptance"
	"rental/infra/batchstore"
	"rental/infra/depstate"
	"rental/infra/kafka"
	"rental/infra/metrics"
	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/batches"
	"rental/schemas/events"
	"rental/schemas/orders"
	"rental/schemas/pricing"
	"rental/schemas/topics"
)

// Placer places an order for an account inside tx with every check and charge of
// POST /v1/orders and returns it; *acceptance.Orders is one. A refusal is a catalogue
// error (*apierr.Error) and writes nothing; an order with the placement's client_order_id
// in the batch already is acceptance.ErrPlacedBefore.
type Placer interface {
	PlaceTx(ctx context.Context, tx pgx.Tx, accountID string, p acceptance.Placement) (orders.Record, error)
}

// Options configure a Flow.
type Options struct {
	Pool   *pgxpool.Pool // required
	Placer Placer        // required
	// Workers is how many receivers one replica places at once (default 4). Placements of
	// one account queue on its ledger row anyway; more workers help many accounts.
	Workers int
	// PollEvery is how often an idle worker looks for due receivers (default 100 ms).
	PollEvery time.Duration
	// PlaceEvery, when set, is the least time between two placements of one worker: a
	// throttle for operators (a large batch then does not crowd the database).
	PlaceEvery time.Duration
	// RetryEvery is how long a receiver waits after a refusal that passes (1101 in-flight
	// limit, 4004 ledger conflict) or a database error before it is tried again (default 1 s).
	RetryEvery time.Duration
	// ChainRetries is how many placements of one receiver may meet 5003 chain_unavailable
	// (no fresh price snapshot, the node cannot tell the receiver's activation) before the
	// receiver fails with it (default 60, a minute at RetryEvery's default): an outage of
	// the pricer or the node delays a batch rather than failing all of it.
	ChainRetries int
	// SweepEvery is how often receivers whose order is decided are resolved without
	// waiting for the order event (default 5 s).
	SweepEvery time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Flow is the batch processor.
type Flow struct {
	o   Options
	log *slog.Logger

	placements *prometheus.CounterVec
	outcomes   *prometheus.CounterVec
	finished   *prometheus.CounterVec
	errs       prometheus.Counter
	// placing logs one line when placements start failing (a database outage fails every
	// worker's every try) and one with the count when one succeeds again.
	placing *depstate.Tracker
}

// New checks the options and registers the metrics.
func New(o Options) (*Flow, error) {
	if o.Pool == nil || o.Placer == nil {
		return nil, errors.New("batchflow: Pool and Placer are required")
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 100 * time.Millisecond
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = time.Second
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = 5 * time.Second
	}
	if o.ChainRetries <= 0 {
		o.ChainRetries = 60
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Flow{o: o, log: o.Logger.With("stage", "batchflow")}
	f.placing = depstate.New("batch placement", f.log)
	f.placements = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "batchflow_placements_total",
		Help: "Batch receivers the processor handled, by result: placed, refused (final outcome), retry (1101, 4004, database error).",
	}, []string{"result"}))
	f.outcomes = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "batchflow_receiver_outcomes_total", Help: "Final receiver outcomes recorded, by outcome.",
	}, []string{"outcome"}))
	f.finished = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "batchflow_batches_finished_total", Help: "Batches ended (batch.completed written), by final status.",
	}, []string{"status"}))
	f.errs = metrics.Register(o.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "batchflow_errors_total", Help: "Placements and outcome updates that failed on a database or node error and are retried.",
	}))
	return f, nil
}

// RunOptions configure the processor's order-event input.
type RunOptions struct {
	// Brokers of the order events topic; empty runs without the consumer (the sweep alone
	// then resolves outcomes, every SweepEvery).
	Brokers []string
	// Group is the consumer group of the order events (default "batchflow.orders").
	Group      string
	ClientOpts []kgo.Opt
}

// Run places receivers, consumes order events and sweeps decided orders until ctx ends.
func (f *Flow) Run(ctx context.Context, ro RunOptions) error {
	g, gctx := errgroup.WithContext(ctx)
	if len(ro.Brokers) > 0 {
		if ro.Group == "" {
			ro.Group = "batchflow.orders"
		}
		r, err := kafka.NewRunner(kafka.RunnerOptions{
			Brokers: ro.Brokers, Group: ro.Group, Topics: []string{topics.OrderEvents.Name},
			Handler: f.HandleOrderEvent, Logger: f.log, Registerer: f.o.Registerer, ClientOpts: ro.ClientOpts,
		})
		if err != nil {
			return err
		}
		g.Go(func() error { return r.Run(gctx) })
	}
	for range f.o.Workers {
		g.Go(func() error { return f.work(gctx) })
	}
	g.Go(func() error { return f.sweep(gctx) })
	f.log.Info("batch processor up", "workers", f.o.Workers)
	err := g.Wait()
	f.log.Info("batch processor stopped")
	return err
}

// work places due receivers one at a time until ctx ends, resting PollEvery when none is due.
func (f *Flow) work(ctx context.Context) error {
	for ctx.Err() == nil {
		did, err := f.PlaceNext(ctx)
		if ctx.Err() == nil {
			if err != nil {
				f.errs.Inc()
			}
			f.placing.Observe(err) // failed receivers are retried
		}
		wait := f.o.PlaceEvery
		if !did || err != nil {
			wait = max(wait, f.o.PollEvery)
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
	return nil
}

// PlaceNext places the order of one due pending receiver and records the result, in one
// transaction. did is false when no receiver was due.
func (f *Flow) PlaceNext(ctx context.Context) (did bool, err error) {
	var (
		c        batchstore.Claimed
		result   string
		outcome  batches.State
		finished *batchstore.Finished
		retryErr error
	)
	err = pgx.BeginFunc(ctx, f.o.Pool, func(tx pgx.Tx) error {
		var ok bool
		var err error
		if c, ok, err = batchstore.ClaimDue(ctx, tx, f.o.Now()); err != nil || !ok {
			return err
		}
		did = true
		var orderID string
		var perr error
		if c.AccountStatus == "suspended" || c.AccountStatus == "closed" {
			// The auth layer refuses every order of such an account (1008); a batch
			// accepted before the suspension places none either.
			perr = apierr.AccountSuspended.New("the account is " + c.AccountStatus + "; it places no orders")
		} else {
			orderID, perr = f.place(ctx, tx, c)
		}
		now := f.o.Now()
		var refusal *apierr.Error
		switch {
		case perr == nil:
			result = "placed"
			return batchstore.MarkPlaced(ctx, tx, c.BatchID, c.Index, orderID, now)
		case !errors.As(perr, &refusal):
			if ctx.Err() != nil {
				return perr
			}
			// A database or node error: nothing was placed (the savepoint rolled back);
			// try the receiver again later rather than hold a worker on it.
			result, retryErr = "retry", perr
			return batchstore.Postpone(ctx, tx, c.BatchID, c.Index, now.Add(f.o.RetryEvery), now)
		case refusal.Code == apierr.ConcurrencyLimited, refusal.Code == apierr.LedgerConflict,
			refusal.Code == apierr.ChainUnavailable && c.Attempts+1 < f.o.ChainRetries:
			// Refusals that pass by themselves: the account's orders in flight get
			// delivered, a colliding creation commits, the pricer or the node comes back.
			// The receiver stays pending (a cancel can still take it).
			result = "retry"
			return batchstore.Postpone(ctx, tx, c.BatchID, c.Index, now.Add(f.o.RetryEvery), now)
		}
		result, outcome = "refused", batches.StateFailed
		if refusal.Code == apierr.InsufficientFunds || refusal.Code == apierr.BalanceReserved {
			outcome = batches.InsufficientFunds
		}
		rerr := &batches.ReceiverError{Code: refusal.Code.Code, Slug: refusal.Code.Slug, Message: refusal.Message, Details: refusal.Details}
		if rerr.Message == "" {
			rerr.Message = refusal.Code.Desc
		}
		var resolved bool
		resolved, finished, err = batchstore.Resolve(ctx, tx, c.BatchID, c.Index, []batches.State{batches.Pending}, outcome, rerr, now)
		if err != nil || !resolved {
			return err
		}
		// The refused receiver still gets its order, failed and never charged, so that a
		// batch of N receivers yields N order events (spec, Events, semantics 6).
		return f.recordRefused(ctx, tx, c, rerr, now)
	})
	if err != nil {
		return did, fmt.Errorf("batch %s receiver %d: %w", c.BatchID, c.Index, err)
	}
	if !did {
		return false, nil
	}
	f.placements.WithLabelValues(result).Inc()
	if outcome != "" {
		f.outcomes.WithLabelValues(string(outcome)).Inc()
	}
	if retryErr != nil {
		f.errs.Inc()
		f.log.Warn("batch receiver placement failed; retried later", "batch", c.BatchID, "receiver", c.Index, "err", retryErr)
	}
	f.ended(finished)
	return true, nil
}

// recordRefused stores the failed order of a receiver refused at placement, with
// order.failed, and attaches it to the receiver.
func (f *Flow) recordRefused(ctx context.Context, tx pgx.Tx, c batchstore.Claimed, rerr *batches.ReceiverError, now time.Time) error {
	n := orderstore.NewOrder{ID: orderstore.NewID(), AccountID: c.AccountID, Network: c.Network, ClientOrderID: c.ClientOrderID(),
		BatchID: &c.BatchID, Resource: orders.Resource(c.Resource), Amount: c.Amount, Receiver: c.Receiver, Activate: c.Activate,
		CreatedAt: now}
	tier, secs := c.Tier, pricing.TierSeconds(pricing.Tier(c.Tier))
	n.Tier, n.DurationSeconds = &tier, &secs
	row, err := orderstore.InsertRefused(ctx, tx, n, orders.Failure{Code: rerr.Code, Slug: rerr.Slug, Message: rerr.Message})
	if err != nil {
		return err
	}
	return batchstore.AttachOrder(ctx, tx, c.BatchID, c.Index, row.ID)
}

// place runs the Placer in a savepoint, so that a refusal or an error inside it leaves the
// claim's transaction usable for recording the result. It returns the order's id, also
// when the order was placed before (a crash after the order committed cannot happen, since
// the order and the receiver's state commit together, but the lookup costs nothing).
func (f *Flow) place(ctx context.Context, tx pgx.Tx, c batchstore.Claimed) (string, error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return "", err
	}
	addr, err := tron.ParseAddress(c.Receiver)
	if err != nil {
		return "", errors.Join(err, sp.Rollback(ctx)) // stored by the edge after validation: never happens
	}
	batchID := c.BatchID
	p := acceptance.Placement{ClientOrderID: c.ClientOrderID(), BatchID: &batchID, Resource: pricing.Resource(c.Resource),
		Tier: pricing.Tier(c.Tier), Amount: c.Amount, Receiver: addr, Activate: c.Activate, MaxPriceSun: c.MaxPriceSun}
	rec, perr := f.o.Placer.PlaceTx(ctx, sp, c.AccountID, p)
	if perr == nil {
		return rec.ID, sp.Commit(ctx)
	}
	if err := sp.Rollback(ctx); err != nil {
		return "", errors.Join(perr, err)
	}
	if errors.Is(perr, acceptance.ErrPlacedBefore) {
		return batchstore.PlacedOrder(ctx, tx, c)
	}
	return "", perr
}

func (f *Flow) ended(fin *batchstore.Finished) {
	if fin == nil {
		return
	}
	f.finished.WithLabelValues(string(fin.Data.Status)).Inc()
	f.log.Info("batch finished", "batch", fin.Data.BatchID, "status", fin.Data.Status, "total", fin.Data.Summary.Total,
		"charged_amount_sun", fin.Data.ChargedAmountSun)
}

// HandleOrderEvent resolves the batch receiver of an order.confirmed or order.failed.
// Other events, orders of no batch and receivers resolved before change nothing.
func (f *Flow) HandleOrderEvent(ctx context.Context, r *kgo.Record) error {
	var env events.Envelope
	if err := json.Unmarshal(r.Value, &env); err != nil {
		return kafka.Unprocessable(fmt.Errorf("not an event envelope: %w", err)) // dead-lettered
	}
	if env.Event != orders.EventConfirmed && env.Event != orders.EventFailed {
		return nil
	}
	var d struct {
		OrderID string  `json:"order_id"`
		BatchID *string `json:"batch_id"`
	}
	if err := json.Unmarshal(env.Data, &d); err != nil || d.OrderID == "" {
		return kafka.Unprocessable(fmt.Errorf("%s event %s without an order_id: %v", env.Event, env.EventID, err)) // dead-lettered
	}
	// order.confirmed names the batch; order.failed does not (the spec's fields), so a
	// failed order is looked up by id.
	if env.Event == orders.EventConfirmed && d.BatchID == nil {
		return nil
	}
	return f.ResolveOrder(ctx, d.OrderID)
}

// ResolveOrder records the outcome of the order's batch receiver when the order has one.
func (f *Flow) ResolveOrder(ctx context.Context, orderID string) error {
	var (
		to       batches.State
		finished *batchstore.Finished
	)
	err := pgx.BeginFunc(ctx, f.o.Pool, func(tx pgx.Tx) error {
		var err error
		to, finished, err = batchstore.ResolveOrder(ctx, tx, orderID, f.o.Now())
		return err
	})
	if err != nil {
		return fmt.Errorf("resolve batch receiver of order %s: %w", orderID, err)
	}
	if to != "" {
		f.outcomes.WithLabelValues(string(to)).Inc()
	}
	f.ended(finished)
	return nil
}

// sweep resolves receivers whose order is decided, every SweepEvery.
func (f *Flow) sweep(ctx context.Context) error {
	t := time.NewTicker(f.o.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ids, err := batchstore.DecidedOrders(ctx, f.o.Pool, 100)
		if err != nil {
			if ctx.Err() == nil {
				f.errs.Inc()
				f.log.Warn("batch outcome sweep failed", "err", err)
			}
			continue
		}
		for _, id := range ids {
			if err := f.ResolveOrder(ctx, id); err != nil && ctx.Err() == nil {
				f.errs.Inc()
				f.log.Warn("batch outcome sweep: resolving failed", "order", id, "err", err)
			}
		}
	}
}
