// Package subscriptions is the subscription watcher stage (docs/subscriptions.md): every
// check interval it looks at each live subscription, reads its address's resources from
// the node, and places refills, tops up plans, bills plans daily, and suspends, pauses and
// resumes subscriptions, writing each change, its history row and its subscription.* event
// in one transaction.
//
// Replicas: a check claims its subscription's row with FOR UPDATE SKIP LOCKED and holds the
// lock until the check commits, so two replicas never look at one subscription at once. A
// refill's client_order_id is derived from the subscription and its refill sequence number,
// which the same transaction advances: a check that rolls back (or a replica that dies
// mid-check) leaves the sequence where it was, and the retry places the same order id, so
// no check can ever place a refill twice.
package subscriptions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/acceptance"
	"rental/infra/metrics"
	"rental/infra/substore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/autorefill"
	"rental/schemas/events"
	"rental/schemas/orders"
	"rental/schemas/pricing"
)

// Placer prices, charges and stores an order inside tx with every check of POST
// /v1/orders, refusing with the same catalogue errors (4001 with required_sun and
// available_sun, 3006, 5001, ...) and writing nothing on a refusal; *acceptance.Orders is
// one. acceptance.ErrPlacedBefore means an order with the refill's client order id exists
// already.
type Placer interface {
	PlaceTx(ctx context.Context, tx pgx.Tx, accountID string, p acceptance.Placement) (orders.Record, error)
}

// Chain reads an address's resources; *tron.Client is one.
type Chain interface {
	GetAccountResource(ctx context.Context, addr tron.Address) (*tron.AccountResource, error)
}

// Defaults of Options.
const (
	DefaultCheckEvery   = 10 * time.Second
	DefaultGrace        = 24 * time.Hour
	DefaultRenewalLead  = time.Minute
	DefaultPollEvery    = 500 * time.Millisecond
	DefaultChainTimeout = 3 * time.Second
)

// Options are the watcher's dependencies.
type Options struct {
	Pool   *pgxpool.Pool      // required
	Chain  Chain              // required
	Placer Placer             // required
	Ledger substore.FeeLedger // required: daily fees
	// CheckEvery is the interval between two checks of one subscription.
	CheckEvery time.Duration
	// Grace is how long a failed daily charge is retried (grace_until).
	Grace time.Duration
	// RenewalLead is how long before a renewal subscription's rental ends the next one is ordered.
	RenewalLead time.Duration
	// PollEvery is how often the watcher looks for due subscriptions.
	PollEvery    time.Duration
	ChainTimeout time.Duration
	Now          func() time.Time // default time.Now; tests move it
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
}

// Watcher is the stage.
type Watcher struct {
	o       Options
	log     *slog.Logger
	checks  *prometheus.CounterVec
	refills *prometheus.CounterVec
	changes *prometheus.CounterVec
	charges *prometheus.CounterVec
	lag     prometheus.Gauge
}

// New checks the options and registers the metrics.
func New(o Options) (*Watcher, error) {
	if o.Pool == nil || o.Chain == nil || o.Placer == nil || o.Ledger == nil {
		return nil, errors.New("subscriptions: Pool, Chain, Placer and Ledger are required")
	}
	if o.CheckEvery <= 0 {
		o.CheckEvery = DefaultCheckEvery
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.RenewalLead <= 0 {
		o.RenewalLead = DefaultRenewalLead
	}
	if o.PollEvery <= 0 {
		o.PollEvery = min(DefaultPollEvery, o.CheckEvery)
	}
	if o.ChainTimeout <= 0 {
		o.ChainTimeout = DefaultChainTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{o: o, log: o.Logger.With("stage", "subscriptions")}
	w.checks = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "subscription_checks_total", Help: "Subscription checks by outcome (idle, refilled, waiting, skipped, chain_error, failed)."}, []string{"outcome"}))
	w.refills = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "subscription_refills_total", Help: "Refill and top-up orders placed, by subscription kind (legacy, plan)."}, []string{"kind"}))
	w.changes = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "subscription_status_changes_total", Help: "Status changes made by the watcher, by new status and reason."}, []string{"status", "reason"}))
	w.charges = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "subscription_fee_charges_total", Help: "Daily plan fee charges by result (charged, refused)."}, []string{"result"}))
	w.lag = metrics.Register(o.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "subscription_check_lag_seconds", Help: "How far behind its due time the most overdue subscription check is (0 when none is due); growing means the watchers cannot keep up or are failing."}))
	return w, nil
}

// measureLag sets the lag gauge from the oldest due check (the index subscriptions_due).
func (w *Watcher) measureLag(ctx context.Context) {
	oldest, err := substore.OldestDue(ctx, w.o.Pool)
	if err != nil {
		return
	}
	lag := 0.0
	if oldest != nil {
		lag = max(w.o.Now().Sub(*oldest).Seconds(), 0)
	}
	w.lag.Set(lag)
}

// Run checks due subscriptions until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.o.PollEvery)
	defer t.Stop()
	for {
		w.measureLag(ctx)
		if _, err := w.Sweep(ctx); err != nil && ctx.Err() == nil {
			w.log.Error("subscription sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep checks every subscription due now (each in its own transaction) and returns how
// many it checked.
func (w *Watcher) Sweep(ctx context.Context) (int, error) {
	n := 0
	for ctx.Err() == nil {
		did, err := w.checkOne(ctx)
		if err != nil {
			w.checks.WithLabelValues("failed").Inc()
			return n, err
		}
		if !did {
			return n, nil
		}
		n++
	}
	return n, nil
}

// checkOne claims one due subscription and checks it in one transaction.
func (w *Watcher) checkOne(ctx context.Context) (bool, error) {
	did := false
	err := pgx.BeginFunc(ctx, w.o.Pool, func(tx pgx.Tx) error {
		now := w.o.Now().UTC().Truncate(time.Millisecond)
		s, ok, err := substore.ClaimDue(ctx, tx, now)
		if err != nil || !ok {
			return err
		}
		did = true
		if s.Status == autorefill.Cancelled {
			s.NextCheckAt = nil
			return substore.Save(ctx, tx, s, now)
		}
		c := &check{w: w, tx: tx, s: &s, now: now, outcome: "idle"}
		if err := c.run(ctx); err != nil {
			return fmt.Errorf("subscription %s: %w", s.ID, err)
		}
		w.checks.WithLabelValues(c.outcome).Inc()
		next := now.Add(w.o.CheckEvery)
		s.NextCheckAt = &next
		return substore.Save(ctx, tx, s, now)
	})
	return did, err
}

// check is one look at one subscription, inside the transaction holding its row.
type check struct {
	w       *Watcher
	tx      pgx.Tx
	s       *substore.Row
	now     time.Time
	outcome string
}

func (c *check) run(ctx context.Context) error {
	s := c.s
	today := c.now.UTC().Truncate(24 * time.Hour)
	if s.RefillsDay == nil || !s.RefillsDay.Equal(today) {
		s.RefillsToday, s.RefillsDay = 0, &today
	}
	frozen, err := substore.AccountFrozen(ctx, c.tx, s.AccountID)
	if err != nil {
		return err
	}
	if frozen {
		// A suspended or closed account reads only: no refill, no fee, no status change,
		// until support unfreezes it.
		c.outcome = "skipped"
		return nil
	}
	if s.Kind == autorefill.Plan {
		if err := c.bill(ctx); err != nil {
			return err
		}
	}
	if err := c.resumeIfCleared(ctx); err != nil {
		return err
	}
	switch {
	case s.Status == autorefill.Active, s.Status == autorefill.Suspended:
	case s.Status == autorefill.Paused && s.Kind == autorefill.Plan && reason(s) == autorefill.ReasonReserveExhausted:
	default:
		return nil // paused by the user or for billing: nothing is ordered
	}
	if s.LastOrderID != nil {
		// Never refill again while the previous refill is still being delivered.
		st, ok, err := substore.LastOrder(ctx, c.tx, *s.LastOrderID)
		if err != nil {
			return err
		}
		if ok && orders.Status(st.Status).InFlight() {
			c.outcome = "waiting"
			return nil
		}
	}
	available, err := c.available(ctx)
	if err != nil {
		c.w.log.Warn("subscription check: node read failed; retried at the next check", "subscription", s.ID, "err", err)
		c.outcome = "chain_error"
		return nil
	}
	if s.Kind == autorefill.Plan {
		return c.topUp(ctx, available)
	}
	return c.refill(ctx, available)
}

func reason(s *substore.Row) string {
	if s.StatusReason == nil {
		return ""
	}
	return *s.StatusReason
}

// available is the free resource on the receiver: limit minus used (bandwidth counts the
// daily free allowance too, as GET /v1/resources shows it).
func (c *check) available(ctx context.Context) (int64, error) {
	addr, err := tron.ParseAddress(c.s.Receiver)
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.w.o.ChainTimeout)
	defer cancel()
	r, err := c.w.o.Chain.GetAccountResource(rctx, addr)
	if err != nil {
		return 0, err
	}
	if c.s.Resource == "bandwidth" {
		return (r.FreeNetLimit - r.FreeNetUsed) + (r.NetLimit - r.NetUsed), nil
	}
	return r.EnergyLimit - r.EnergyUsed, nil
}

// resumeIfCleared ends a suspension whose cause is gone without a refill: the next UTC
// day for daily_limit_reached, an available balance covering what was missing for
// insufficient_funds. (price_above_limit clears when a refill under the cap succeeds.)
func (c *check) resumeIfCleared(ctx context.Context) error {
	s := c.s
	if s.Status != autorefill.Suspended {
		return nil
	}
	switch reason(s) {
	case autorefill.ReasonDailyLimit:
		if s.MaxRefillsPerDay == nil || s.RefillsToday < *s.MaxRefillsPerDay {
			return c.resume(ctx)
		}
	case autorefill.ReasonInsufficientFunds:
		if s.SuspendedReqSun == nil {
			return nil
		}
		avail, err := substore.AvailableSun(ctx, c.tx, s.AccountID)
		if err != nil {
			return err
		}
		if avail >= *s.SuspendedReqSun {
			return c.resume(ctx)
		}
	}
	return nil
}

// resume makes the subscription active again (history resume; the spec has no event).
func (c *check) resume(ctx context.Context) error {
	c.s.Status, c.s.StatusReason, c.s.SuspendedReqSun = autorefill.Active, nil, nil
	c.w.changes.WithLabelValues(string(autorefill.Active), "").Inc()
	return substore.AddHistory(ctx, c.tx, c.s.ID, substore.History{Kind: autorefill.HistResume, At: c.now})
}

// suspend moves the subscription to suspended for reason and sends subscription.suspended,
// once per suspension: a check that finds the same cause again changes nothing.
func (c *check) suspend(ctx context.Context, why string, required, available *int64) error {
	s := c.s
	c.outcome = "skipped"
	if s.Status == autorefill.Suspended && reason(s) == why {
		if why == autorefill.ReasonInsufficientFunds {
			s.SuspendedReqSun = required
		}
		return nil
	}
	s.Status, s.StatusReason, s.SuspendedReqSun = autorefill.Suspended, &why, nil
	if why == autorefill.ReasonInsufficientFunds {
		s.SuspendedReqSun = required
	}
	c.w.changes.WithLabelValues(string(autorefill.Suspended), why).Inc()
	return substore.Emit(ctx, c.tx, *s, events.EventSubscriptionSuspended, events.SubscriptionSuspended{
		SubscriptionID: s.ID, Receiver: s.Receiver, Reason: why, RequiredSun: required, AvailableSun: available})
}

// pause moves a plan subscription to paused for reason with subscription.paused, once.
func (c *check) pause(ctx context.Context, why string) error {
	s := c.s
	if s.Status == autorefill.Paused && reason(s) == why {
		return nil
	}
	s.Status, s.StatusReason, s.SuspendedReqSun = autorefill.Paused, &why, nil
	c.w.changes.WithLabelValues(string(autorefill.Paused), why).Inc()
	if err := substore.AddHistory(ctx, c.tx, s.ID, substore.History{Kind: autorefill.HistPause, At: c.now}); err != nil {
		return err
	}
	return substore.Emit(ctx, c.tx, *s, events.EventSubscriptionPaused, events.SubscriptionPaused{SubscriptionID: s.ID, Receiver: s.Receiver, Reason: why})
}

// refill is the legacy rule: refill mode orders refill_amount when available is below
// threshold_amount; renewal mode re-orders it when the standing rental is about to end.
func (c *check) refill(ctx context.Context, available int64) error {
	s := c.s
	due := available < s.ThresholdAmount
	if s.Mode == autorefill.Renewal {
		due = true
		if s.LastOrderID != nil {
			st, ok, err := substore.LastOrder(ctx, c.tx, *s.LastOrderID)
			if err != nil {
				return err
			}
			live := ok && !orders.Status(st.Status).Terminal() && st.ExpiresAt != nil
			due = !live || !c.now.Before(st.ExpiresAt.Add(-c.w.o.RenewalLead))
		}
	}
	if !due {
		return nil
	}
	if s.MaxRefillsPerDay != nil && s.RefillsToday >= *s.MaxRefillsPerDay {
		return c.suspend(ctx, autorefill.ReasonDailyLimit, nil, nil)
	}
	return c.place(ctx, s.RefillAmount, available, s.MaxPriceSun)
}

// topUp is the plan rule: below low, order a 1 h top-up to high, unless it would take the
// energy this subscription has delegated at once above the reserve (paused,
// reserve_exhausted, until enough of its rentals have ended).
func (c *check) topUp(ctx context.Context, available int64) error {
	s := c.s
	rule := s.Rule()
	amount, due := autorefill.TopUp(rule, available)
	delegated, err := substore.DelegatedEnergy(ctx, c.tx, s.ID, c.now)
	if err != nil {
		return err
	}
	if s.Status == autorefill.Paused { // reserve_exhausted
		if due && !autorefill.FitsReserve(rule, delegated, amount) {
			return nil
		}
		if err := c.resume(ctx); err != nil {
			return err
		}
	}
	if !due {
		return nil
	}
	if !autorefill.FitsReserve(rule, delegated, amount) {
		c.outcome = "skipped"
		return c.pause(ctx, autorefill.ReasonReserveExhausted)
	}
	return c.place(ctx, amount, available, nil)
}

// place orders a refill in a savepoint: a refusal rolls back only the placement, and the
// subscription's own change (a suspension) still commits.
func (c *check) place(ctx context.Context, amount, trigger int64, maxPrice *int64) error {
	s := c.s
	addr, err := tron.ParseAddress(s.Receiver)
	if err != nil {
		return err
	}
	seq := s.RefillSeq + 1
	// The client order id is derived from the subscription and its refill sequence; a
	// MaxPriceSun (the legacy cap) refuses a total above it with 3006, nothing charged.
	subID := s.ID
	r := acceptance.Placement{SubscriptionID: &subID, ClientOrderID: fmt.Sprintf("%s:r%d", s.ID, seq),
		Resource: pricing.Resource(s.Resource), Amount: amount, Tier: pricing.Tier(s.Tier), Receiver: addr, MaxPriceSun: maxPrice}
	var placed orders.Record
	err = pgx.BeginFunc(ctx, c.tx, func(sp pgx.Tx) error {
		var err error
		placed, err = c.w.o.Placer.PlaceTx(ctx, sp, s.AccountID, r)
		return err
	})
	if errors.Is(err, acceptance.ErrPlacedBefore) {
		// Only possible if the sequence was not advanced with an earlier placement; skip
		// the number rather than place a second order under it.
		c.w.log.Error("subscription refill found placed before; advancing the sequence", "subscription", s.ID, "client_order_id", r.ClientOrderID)
		s.RefillSeq = seq
		return nil
	}
	var ae *apierr.Error
	if err != nil && !errors.As(err, &ae) {
		return err
	}
	if err != nil {
		return c.refused(ctx, ae)
	}
	s.RefillSeq, s.RefillsToday = seq, s.RefillsToday+1
	at := c.now
	s.LastRefillAt, s.LastOrderID = &at, &placed.ID
	if s.Status != autorefill.Active {
		if err := c.resume(ctx); err != nil {
			return err
		}
	}
	c.outcome = "refilled"
	c.w.refills.WithLabelValues(string(s.Kind)).Inc()
	h := substore.History{Kind: autorefill.HistRefill, AmountSun: &placed.TotalAmountSun, OrderID: &placed.ID, At: c.now}
	if s.Resource == "energy" {
		h.EnergyDelta = &amount
	}
	if err := substore.AddHistory(ctx, c.tx, s.ID, h); err != nil {
		return err
	}
	return substore.Emit(ctx, c.tx, *s, events.EventSubscriptionRefilled, events.SubscriptionRefilled{
		SubscriptionID: s.ID, OrderID: placed.ID, Receiver: s.Receiver, Resource: s.Resource, Amount: amount, Tier: s.Tier,
		TriggerAvailable: trigger, ThresholdAmount: s.ThresholdAmount, TotalAmountSun: placed.TotalAmountSun, RefillsToday: s.RefillsToday})
}

// refused handles a placement refused with a catalogue error: funds and the price cap
// suspend (Semantics 7); anything else (supply, a paused tier, the in-flight limit, an
// unreachable node) is retried at the next check, and a plan records top_up_failed once.
func (c *check) refused(ctx context.Context, e *apierr.Error) error {
	switch e.Code {
	case apierr.InsufficientFunds, apierr.BalanceReserved:
		return c.suspend(ctx, autorefill.ReasonInsufficientFunds, detail(e, "required_sun"), detail(e, "available_sun"))
	case apierr.PriceAboveLimit:
		return c.suspend(ctx, autorefill.ReasonPriceAboveLimit, detail(e, "total_amount_sun"), nil)
	}
	c.outcome = "skipped"
	c.w.log.Warn("subscription refill refused; retried at the next check", "subscription", c.s.ID, "code", e.Code.Code, "err", e.Message)
	if c.s.Kind != autorefill.Plan {
		return nil
	}
	last, err := substore.LastHistoryKind(ctx, c.tx, c.s.ID)
	if err != nil {
		return err
	}
	if last == autorefill.HistTopUpFailed {
		return nil
	}
	return substore.AddHistory(ctx, c.tx, c.s.ID, substore.History{Kind: autorefill.HistTopUpFailed, At: c.now})
}

func detail(e *apierr.Error, key string) *int64 {
	switch v := e.Details[key].(type) {
	case int64:
		return &v
	case int:
		n := int64(v)
		return &n
	}
	return nil
}

// bill charges a plan's daily fee when next_billing_at has come, for every status but
// cancelled. A refused charge pauses the subscription (billing_failed) with grace_until;
// within the grace each check tries again, and a charge that passes makes it active. After
// the grace it stays paused until its owner resumes it (PATCH status active charges then).
func (c *check) bill(ctx context.Context) error {
	s := c.s
	if s.NextBillingAt == nil || c.now.Before(*s.NextBillingAt) || s.DailyFeeSun == 0 {
		return nil
	}
	failed := s.Status == autorefill.Paused && reason(s) == autorefill.ReasonBillingFailed
	if failed && s.GraceUntil != nil && !c.now.Before(*s.GraceUntil) {
		return nil
	}
	from := *s.NextBillingAt
	err := pgx.BeginFunc(ctx, c.tx, func(sp pgx.Tx) error {
		return substore.ChargeFee(ctx, sp, c.w.o.Ledger, s, from, c.now)
	})
	var ae *apierr.Error
	switch {
	case err == nil:
		c.w.charges.WithLabelValues("charged").Inc()
		if failed {
			return c.resume(ctx)
		}
		return nil
	case errors.As(err, &ae) && (ae.Code == apierr.InsufficientFunds || ae.Code == apierr.BalanceReserved):
		// ChargeFee advanced nothing: the savepoint rolled its writes back, and s is only
		// changed after the ledger accepted the charge.
		c.w.charges.WithLabelValues("refused").Inc()
		if failed {
			return nil
		}
		grace := c.now.Add(c.w.o.Grace)
		s.GraceUntil = &grace
		return c.pause(ctx, autorefill.ReasonBillingFailed)
	}
	return err
}
