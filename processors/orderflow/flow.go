// Package orderflow is the order processor: it moves each order from created to active and
// then to expired or reclaimed, or to failed with the charge reversed (docs/orders.md).
//
// Every step runs under the order row's lock (SELECT … FOR UPDATE), so replicas of the
// processor may all be woken for one order (by its intent on Kafka, by a chain fact, by the
// due-time sweep) and still apply each step once. Chain work goes through the signer
// journal (journal.go): a transaction is signed and stored, the store commits, and only
// then is it broadcast; a restart broadcasts the stored bytes again, so a kill at any
// point can neither lose a delegation nor make a second one.
package orderflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/custody"
	"rental/infra/ledgerstore"
	"rental/infra/metrics"
	"rental/infra/orderstore"
	"rental/infra/outbox"
	"rental/infra/supply"
	"rental/infra/supplystore"
	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// Node is the part of the java-tron HTTP API the processor uses; *tron.Client is one.
type Node interface {
	GetAccountResource(ctx context.Context, addr tron.Address) (*tron.AccountResource, error)
	GetCanDelegatedMaxSize(ctx context.Context, owner tron.Address, resource tron.ResourceCode) (int64, error)
	GetDelegatedResourceV2(ctx context.Context, from, to tron.Address) ([]tron.DelegatedResource, error)
	DelegateResource(ctx context.Context, d *tron.DelegateResourceContract) (*tron.Transaction, error)
	UnDelegateResource(ctx context.Context, u *tron.UnDelegateResourceContract) (*tron.Transaction, error)
	CreateAccount(ctx context.Context, a *tron.AccountCreateContract) (*tron.Transaction, error)
	BroadcastTransaction(ctx context.Context, tx *tron.Transaction) (*tron.BroadcastResult, error)
	GetTransactionInfoByID(ctx context.Context, txid string) (*tron.TransactionInfo, error)
	GetHead(ctx context.Context) (*tron.Block, error)
	GetSolidHead(ctx context.Context) (*tron.Block, error)
	GetTransactionByID(ctx context.Context, txid string) (*tron.Transaction, error)
	TriggerSmartContract(ctx context.Context, t *tron.TriggerSmartContract, feeLimit int64) (*tron.Transaction, error)
	TriggerConstantContract(ctx context.Context, t *tron.TriggerSmartContract) (*tron.TransactionExtention, error)
	GetChainParameters(ctx context.Context) (*tron.ChainParameters, error)
	GetBlockByNum(ctx context.Context, num int64) (*tron.Block, error)
}

// LockPolicy is how the own pools' delegations are locked (docs/order-processing.md,
// "Lock policy", says what each costs the receiver).
type LockPolicy string

const (
	// LockNone delegates unlocked: an undelegation is accepted in the next block, so a
	// reclaim takes the resource back at once and orders on one receiver never collide.
	LockNone LockPolicy = "none"
	// LockTier locks a delegation for its tier when the chain shows no live lock from the
	// pool to the receiver (getdelegatedresourcev2), and delegates unlocked otherwise, so
	// a lock is never reset (TIP-542) or refused as shorter than the one already there.
	LockTier LockPolicy = "tier"
)

// ParseLockPolicy reads DELEGATION_LOCK ("" is LockNone).
func ParseLockPolicy(s string) (LockPolicy, error) {
	switch LockPolicy(s) {
	case "", LockNone:
		return LockNone, nil
	case LockTier:
		return LockTier, nil
	}
	return "", fmt.Errorf("delegation lock policy %q: want none or tier", s)
}

// DeepReserve is the on-chain rental contract of the order book's deep class, the last
// source an order is filled from; *supply.DeepReserve is one.
type DeepReserve interface {
	Contract() tron.Address
	Available(ctx context.Context) (int64, error)
	RentalPrice(ctx context.Context, amount, seconds int64) (int64, error)
	RentCall(receiver tron.Address, amount, seconds int64) []byte
}

// Provider is a market provider that delivers orders itself; *supply.HTTPProvider is one.
// Order must be idempotent on the request's ref.
type Provider interface {
	Slug() string
	Order(ctx context.Context, req supply.ProviderOrderRequest) (supply.ProviderOrderResult, error)
}

// Options configure a Flow.
type Options struct {
	Pool    *pgxpool.Pool
	Node    Node
	Ledger  *ledgerstore.Ledger
	Network network.Network
	// Signers are the own stake pools with their signer keys and the delegate permissions
	// found on chain (infra/custody, started by the caller): allocation draws only from
	// pools a signer may use now, and delegations and reclaims are signed under the
	// pool's permission. Nil: no own pools.
	Signers *custody.Signers
	// Providers are the market providers orders spill to when the own pools cannot fill
	// them (in this order). On a network that does not sell own stake (nile) they are the
	// only supply.
	Providers []Provider
	// Deep is the deep reserve: energy neither the pools nor the providers can deliver is
	// rented from it (the first pool pays the contract), on networks that sell own stake.
	// Nil: no deep fills. DeepFeeLimit is the rent call's fee limit (default 100 TRX).
	Deep         DeepReserve
	DeepFeeLimit int64
	// MarginBps is added to the staked balance a delegation needs, against the drift of
	// the network's energy weight between allocation and inclusion (default supplystore.DefaultMarginBps,
	// 50 = 0.5 %; the pricer counts committable own stock net of the same margin).
	MarginBps int64
	// LandGrace is how long after a transaction's expiration the processor waits for the
	// chain fact of its block before asking the node whether it landed (default 90 s; the
	// fact arrives only at chainwatch's confirmation depth).
	LandGrace time.Duration
	// Confirmations is the depth at which the node's word that a transaction is in a block
	// settles it when its chain fact is late (default 19, chainwatch's CONFIRMATIONS).
	Confirmations int
	// RetryEvery paces retries of a step that waits on the chain or a node error (default 3 s).
	RetryEvery time.Duration
	// LockPolicy locks the pools' delegations (default LockNone).
	LockPolicy LockPolicy
	// BuildRetryFor bounds how long, from the order's creation, a build answer the
	// service does not recognise (tron.Unknown) is retried before the fill fails
	// (default 2 min). Refusals fail the fill at once; temporary answers retry.
	BuildRetryFor time.Duration
	Now           func() time.Time
	Logger        *slog.Logger
	Registerer    prometheus.Registerer
}

// Flow is the order processor's logic, shared by its consumers and its timer.
type Flow struct {
	o        Options
	log      *slog.Logger
	chain    *chainCache
	lockCap  *lockCap
	alloc    allocGroup           // allocate.go
	marks    grouper[*markReq]    // mark.go
	delivers grouper[*deliverReq] // delivergroup.go
	facts    grouper[*factReq]    // confirmgroup.go

	relayed *prometheus.CounterVec // relay.go: relayed transactions by new status

	intentSlots chan struct{}  // run.go: orders being delivered from intents, bounded
	intentWork  sync.WaitGroup // run.go: those workers, waited for when Run ends
	runCtx      context.Context

	allocGroupSize   prometheus.Histogram
	exactSums        prometheus.Counter
	deliverGroupSize prometheus.Histogram
	markGroupSize    prometheus.Histogram
	factGroupSize    prometheus.Histogram

	transitions *prometheus.CounterVec
	stepErrors  prometheus.Counter
	deliverySec prometheus.Histogram
	resent      prometheus.Counter
}

// New checks the options and registers the metrics.
func New(o Options) (*Flow, error) {
	if o.Pool == nil || o.Node == nil || o.Ledger == nil {
		return nil, errors.New("orderflow: Pool, Node and Ledger are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, fmt.Errorf("orderflow: %w", err)
	}
	if o.Signers == nil && len(o.Providers) == 0 {
		return nil, errors.New("orderflow: at least one stake pool key or provider is required")
	}
	if o.MarginBps <= 0 {
		o.MarginBps = supplystore.DefaultMarginBps
	}
	if o.DeepFeeLimit <= 0 {
		o.DeepFeeLimit = 100 * tron.SunPerTRX
	}
	if o.LandGrace <= 0 {
		o.LandGrace = 90 * time.Second
	}
	if o.Confirmations <= 0 {
		o.Confirmations = 19
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = 3 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LockPolicy == "" {
		o.LockPolicy = LockNone
	}
	if _, err := ParseLockPolicy(string(o.LockPolicy)); err != nil {
		return nil, fmt.Errorf("orderflow: %w", err)
	}
	if o.BuildRetryFor <= 0 {
		o.BuildRetryFor = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Flow{o: o, log: o.Logger.With("stage", "orderflow"),
		lockCap: newLockCap(o.Network.MaxLockPeriodBlocks()), chain: newChainCache(supplystore.PoolFigureMaxAge)}
	f.facts.atOnce = factGroupsAtOnce
	f.transitions = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderflow_transitions_total", Help: "Order state changes made by the processor, by new state.",
	}, []string{"to"}))
	f.resent = metrics.Register(o.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderflow_resent_total", Help: "Broadcast transactions sent again because they were in no block two block intervals after they were built (settle.go).",
	}))
	f.stepErrors = metrics.Register(o.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderflow_step_errors_total", Help: "Order steps that failed and will be retried (node or database errors).",
	}))
	f.allocGroupSize = metrics.Register(o.Registerer, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "orderflow_allocation_group_orders", Help: "Orders allocated together in one transaction (allocate.go).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	}))
	f.exactSums = metrics.Register(o.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderflow_allocation_exact_sums_total",
		Help: "Group allocations that summed the pools' in-flight fills because the pools' bounds left too little for an order (allocate.go).",
	}))
	groupHist := func(name, help string) prometheus.Histogram {
		return metrics.Register(o.Registerer, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: name, Help: help, Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}))
	}
	f.deliverGroupSize = groupHist("orderflow_delivery_group_orders", "Orders whose delegations were signed and journaled together in one transaction (delivergroup.go).")
	f.markGroupSize = groupHist("orderflow_mark_group_orders", "Orders marked delegated together in one transaction (mark.go).")
	f.factGroupSize = groupHist("orderflow_confirmation_group_orders", "Orders confirmed together in one transaction from the chain facts of one moment (confirmgroup.go).")
	f.deliverySec = metrics.Register(o.Registerer, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "orderflow_delivery_seconds", Help: "From order creation to order.confirmed.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 90, 120, 300},
	}))
	f.relayed = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderflow_relayed_transactions_total", Help: "Relayed transactions (POST /v1/transactions) moved to a new status, by status (relay.go).",
	}, []string{"status"}))
	for _, st := range orders.TxStatuses {
		if st != orders.TxWaiting { // a relayed transaction starts waiting and moves to the others
			f.relayed.WithLabelValues(string(st))
		}
	}
	return f, nil
}

// RegisterPools records the stake pools in stake_pools: each row is the lock allocation
// takes, so replicas never sell the same stake twice.
func (f *Flow) RegisterPools(ctx context.Context) error {
	for _, p := range f.pools() {
		if err := orderstore.RegisterPool(ctx, f.o.Pool, p.String(), f.o.Network); err != nil {
			return fmt.Errorf("orderflow: register pool: %w", err)
		}
	}
	return nil
}

// Advance moves the order as far as it can go now. It is safe to call any number of times
// from any replica; a step that must wait schedules the order's next_due_at.
func (f *Flow) Advance(ctx context.Context, orderID string) error {
	for range 32 {
		more, err := f.step(ctx, orderID)
		if err != nil {
			if errors.Is(err, orderstore.ErrNotFound) {
				f.log.Warn("intent for an unknown order ignored", "order", orderID)
				return nil
			}
			f.stepErrors.Inc()
			f.reschedule(ctx, orderID, f.o.RetryEvery)
			return fmt.Errorf("orderflow: order %s: %w", orderID, err)
		}
		if !more {
			return nil
		}
	}
	return nil
}

// reschedule makes the order due again after d; used when a step failed unexpectedly.
func (f *Flow) reschedule(ctx context.Context, orderID string, d time.Duration) {
	_ = orderstore.DueAgain(ctx, f.o.Pool, orderID, f.o.Now().Add(d))
}

// action is work a step decided under the lock and does after commit (a broadcast); more
// reports that another step may follow at once.
type action func(ctx context.Context) (more bool, err error)

// step runs one step in its own transaction. more reports that another step may follow at
// once.
func (f *Flow) step(ctx context.Context, orderID string) (more bool, err error) {
	var after action
	err = f.inStepTx(ctx, orderID, func(tx pgx.Tx, o orderstore.Row, pre *loaded) error {
		more, after, err = f.dispatch(ctx, tx, o, pre)
		return err
	})
	if err != nil {
		return false, err
	}
	if after != nil {
		return after(ctx)
	}
	return more, nil
}

// inStepTx runs fn in a transaction that holds the order's row lock, with the order, its
// journal and its fills as read under the lock. BEGIN, the lock and the reads travel in
// one round trip (orderstore.BeginLocked); fn's error, or a panic, rolls the transaction
// back.
func (f *Flow) inStepTx(ctx context.Context, orderID string, fn func(pgx.Tx, orderstore.Row, *loaded) error) error {
	c, err := f.o.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tx, l, err := orderstore.BeginLocked(ctx, c.Conn(), orderID)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if err := fn(tx, l.Row, &loaded{journal: l.Journal, fills: l.Fills}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// loaded is what a step read in the round trip that locked the order: its journal and
// fills as they were at the lock. A step's first read of each uses them; a read after the
// step's own writes goes to the database. nil reads everything from the database.
type loaded struct {
	journal []orderstore.JournalEntry
	fills   []orderstore.Fill
}

func (l *loaded) journalOf(ctx context.Context, tx pgx.Tx, orderID string) ([]orderstore.JournalEntry, error) {
	if l != nil {
		return l.journal, nil
	}
	return orderstore.Journal(ctx, tx, orderID)
}

func (l *loaded) fillsOf(ctx context.Context, tx pgx.Tx, orderID string) ([]orderstore.Fill, error) {
	if l != nil {
		return l.fills, nil
	}
	return orderstore.Fills(ctx, tx, orderID)
}

// dispatch runs the step of o's status; pre is what the step read under the lock (nil:
// nothing, every read goes to the database).
func (f *Flow) dispatch(ctx context.Context, tx pgx.Tx, o orderstore.Row, pre *loaded) (bool, action, error) {
	switch o.Status {
	case orders.Created:
		// Creation placed the hold in the order's own transaction; it is there by
		// construction, so paying is only the acknowledgement, made in the allocation's
		// transaction (paid is not stored; an order found paid, written by an older
		// processor, is allocated below as well).
		f.transitions.WithLabelValues(string(orders.Paid)).Inc()
		return f.allocate(ctx, tx, o)
	case orders.Paid:
		return f.allocate(ctx, tx, o)
	case orders.Allocating:
		return f.deliver(ctx, tx, o, pre)
	case orders.Delegated:
		return f.settle(ctx, tx, o, pre)
	case orders.Confirmed:
		var due *time.Time
		if o.ExpiresAt != nil {
			t := time.Time(*o.ExpiresAt)
			due = &t
		}
		if err := orderstore.Transition(ctx, tx, o.ID, orders.Active, due); err != nil {
			return false, nil, err
		}
		f.transitions.WithLabelValues(string(orders.Active)).Inc()
		return true, nil, nil
	case orders.Active:
		return f.takeBack(ctx, tx, o, pre)
	case orders.Refunded:
		// Support refunded the money of a delivered order; its stake still comes back
		// (a delegation never ends by itself). No event: order.refunded was sent.
		if o.Resource != orders.Activation && o.DelegatedAt != nil {
			if _, next, after, err := f.returnStake(ctx, tx, o, pre); err != nil || next != nil {
				return false, after, err
			}
		}
	}
	// Terminal: nothing to do; clear a stale timer.
	if o.NextDueAt != nil {
		return false, nil, orderstore.ClearDue(ctx, tx, o.ID)
	}
	return false, nil, nil
}

// setStatus changes the status and the timer.
func (f *Flow) setStatus(ctx context.Context, tx pgx.Tx, o orderstore.Row, to orders.Status, due time.Time) error {
	if err := orderstore.Transition(ctx, tx, o.ID, to, &due); err != nil {
		return err
	}
	f.transitions.WithLabelValues(string(to)).Inc()
	return nil
}

// wait schedules the order's next look at due and ends the step.
func (f *Flow) wait(ctx context.Context, tx pgx.Tx, o orderstore.Row, due time.Time) (bool, action, error) {
	return false, nil, f.setDue(ctx, tx, o, due)
}

// emit writes an order event into the outbox in tx.
func (f *Flow) emit(ctx context.Context, tx pgx.Tx, o orderstore.Row, typ string, data any) error {
	env, err := f.event(o, typ, data)
	if err != nil {
		return err
	}
	return outbox.Insert(ctx, tx, env)
}

// event is the customer event typ of order o.
func (f *Flow) event(o orderstore.Row, typ string, data any) (events.Envelope, error) {
	env, err := events.New(typ, o.AccountID, o.Network, data)
	if err != nil {
		return events.Envelope{}, err
	}
	env.Test = o.Test
	return env, nil
}

// setDue sets the order's next look.
func (f *Flow) setDue(ctx context.Context, tx pgx.Tx, o orderstore.Row, at time.Time) error {
	return orderstore.SetDue(ctx, tx, o.ID, at)
}
