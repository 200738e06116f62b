// Package payments is pay by transfer (docs/pricing.md "Pay by transfer"): a TRX transfer
// to a payment address of the price table is an order of the transfer account, delivered
// by the ordinary order pipeline, or it is refunded to its sender.
//
// Three loops share one Processor:
//
//   - follow.go reads blocks PAY_CONFIRMATIONS deep (1: the head block itself) and records
//     every TRX transfer to a payment address (infra/paystore, unique on the transaction
//     id) with the block ids kept for fork detection, cursor and rows in one transaction;
//   - decide.go prices each new payment from the live snapshot (schemas/payments.Decide)
//     and, in one transaction holding the payment's row, credits the transfer account with
//     the amount (ledger kind deposit, ref payment:<txid>) and either places the order
//     (infra/acceptance PlaceTx, client_order_id = the txid, max_price_sun = the decided
//     price) or debits the refund and stores the signed refund transaction;
//   - settle.go follows the orders: delegated -> delivered; confirmed or later -> the rest
//     below one unit is kept (payment_kept), anything undelivered refunded; failed -> the
//     whole unspent amount refunded. refund.go broadcasts stored refunds until they land.
//
// Exactly once: the payment row, the ledger postings (idempotent refs) and the order
// (placed in the payment's transaction) commit together, and a refund transaction is
// signed and stored before it is broadcast, so a crash, SIGKILL or a replay of the chain
// finds the row in its state and never places a second order or signs a second refund.
package payments

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"rental/infra/acceptance"
	"rental/infra/ledgerstore"
	"rental/infra/metrics"
	"rental/infra/paystore"
	"rental/infra/tron"
	"rental/schemas/ledger"
	"rental/schemas/orders"
	"rental/schemas/payments"
	"rental/schemas/pricing"
)

// Placer places an order inside the caller's transaction; *acceptance.Orders is one.
type Placer interface {
	PlaceTx(ctx context.Context, tx pgx.Tx, accountID string, p acceptance.Placement) (orders.Record, error)
}

// Pricer is the live pricer; *acceptance.Prices is one.
type Pricer interface {
	Snapshot() (pricing.Snapshot, error)
	Activated(ctx context.Context, addr tron.Address) acceptance.Activation
}

// Ledger is what the processor posts; *ledgerstore.Ledger is one.
type Ledger interface {
	Credit(ctx context.Context, tx pgx.Tx, c ledgerstore.Credit) (ledgerstore.CreditResult, error)
	Debit(ctx context.Context, tx pgx.Tx, accountID string, kind ledger.Kind, ref string, amountSun int64, referenceID string, details map[string]any) (bool, error)
}

// Address is one payment address with its signing key.
type Address struct {
	RowKey string
	Key    tron.PrivateKey
}

// Options configure a Processor. Store, Ledger, Placer, Prices, Node, Addresses and
// AccountID are required.
type Options struct {
	Store  *paystore.Store
	Ledger Ledger
	Placer Placer
	Prices Pricer
	Node   *tron.Client
	// Addresses are the payment addresses and their keys (infra/stages/paystage derives
	// them from DEPOSIT_HD_KEY).
	Addresses map[tron.Address]Address
	// AccountID is the transfer account every payment's order belongs to.
	AccountID string
	// Tokens are the TRC-20 contracts (USDT) whose transfers to a payment address are
	// recorded and held for support (never an order).
	Tokens []tron.Address
	Rules  payments.Rules
	// Confirmations: a block is read once Confirmations blocks hold it (1: the head).
	Confirmations int
	// Start is the first block read when no cursor is stored; negative: the current head.
	Start int64
	// PollEvery is the wait between polls (default 200 ms).
	PollEvery time.Duration
	// Window is how many block ids are kept for fork detection (default 200).
	Window     int
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
}

// Processor is the pay-by-transfer job.
type Processor struct {
	o    Options
	log  *slog.Logger
	m    *procMetrics
	wake chan struct{}
	// sent is when each stored refund was last broadcast (refund.go).
	sent map[string]time.Time
}

type procMetrics struct {
	outcomes *prometheus.CounterVec
	kept     prometheus.Counter
	refunded prometheus.Counter
	delivery prometheus.Histogram
	forkLoss prometheus.Counter
	forks    prometheus.Counter
}

// New checks the options.
func New(o Options) (*Processor, error) {
	if o.Store == nil || o.Ledger == nil || o.Placer == nil || o.Prices == nil || o.Node == nil || len(o.Addresses) == 0 || o.AccountID == "" {
		return nil, errors.New("payments: Store, Ledger, Placer, Prices, Node, Addresses and AccountID are required")
	}
	if o.Confirmations < 1 {
		o.Confirmations = 1
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 200 * time.Millisecond
	}
	if o.Window <= 0 {
		o.Window = 200
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := o.Registerer
	m := &procMetrics{
		outcomes: metrics.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rental_payments_total",
			Help: "Transfers to payment addresses by outcome: order, refund, kept (dust), held, fork_reclaimed."}, []string{"outcome"})),
		kept: metrics.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: "rental_payments_kept_sun_total",
			Help: "SUN of transfers kept: the rest below one unit's price and refunds below the dust threshold."})),
		refunded: metrics.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: "rental_payments_refunded_sun_total",
			Help: "SUN sent back to senders of transfers."})),
		delivery: metrics.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{Name: "rental_payment_delivery_seconds",
			Help:    "From the block holding a transfer to its order's delegation being broadcast.",
			Buckets: []float64{0.25, 0.5, 1, 2, 3, 4.5, 6, 9, 15, 30, 60}})),
		forkLoss: metrics.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: "rental_payments_fork_loss_sun_total",
			Help: "SUN of orders delivered for transfers a fork removed (the loss pay by transfer takes)."})),
		forks: metrics.Register(r, prometheus.NewCounter(prometheus.CounterOpts{Name: "rental_payments_forks_total",
			Help: "Forks the payment follower rewound."})),
	}
	for _, outcome := range []string{"order", "refund", "kept", "held", "fork_reclaimed"} {
		m.outcomes.WithLabelValues(outcome) // every outcome exported from 0, so its first count is an increase
	}
	return &Processor{o: o, log: o.Logger.With("stage", "payments"), m: m, wake: make(chan struct{}, 1), sent: map[string]time.Time{}}, nil
}

// Run follows the chain and works the payments until ctx ends; failures are logged and
// retried at the poll interval, never ending Run.
func (p *Processor) Run(ctx context.Context) error {
	p.log.Info("pay by transfer up", "addresses", len(p.o.Addresses), "confirmations", p.o.Confirmations, "account", p.o.AccountID)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.loop(ctx, "follow", p.Follow) })
	g.Go(func() error { return p.loop(ctx, "work", p.Work) })
	return g.Wait()
}

func (p *Processor) loop(ctx context.Context, name string, step func(context.Context) error) error {
	t := time.NewTicker(p.o.PollEvery)
	defer t.Stop()
	var last string
	for {
		if err := step(ctx); err != nil && ctx.Err() == nil {
			if msg := err.Error(); msg != last {
				p.log.Error(name+" failed; retrying", "err", err)
				last = msg
			}
		} else if err == nil && last != "" {
			p.log.Info(name + " recovered")
			last = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-p.wakeFor(name):
		}
	}
}

// wakeFor is the channel that wakes the work loop as soon as the follower recorded
// payments (nil, never ready, for the follower itself).
func (p *Processor) wakeFor(name string) <-chan struct{} {
	if name == "work" {
		return p.wake
	}
	return nil
}

func (p *Processor) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Work runs one pass over the payments: decide the new ones, follow the orders, send and
// confirm refunds, and handle transfers a fork removed.
func (p *Processor) Work(ctx context.Context) error {
	return errors.Join(p.decideAll(ctx), p.settleAll(ctx), p.refundAll(ctx), p.orphansAll(ctx))
}
