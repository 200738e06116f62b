// Package substore persists subscriptions (infra/pg/migrations/00014_subscriptions.sql):
// rows, their history (SubscriptionEvent), the customer events of a change (written to the
// outbox in the caller's transaction) and the daily fee charge. Every function that changes
// money or status takes the caller's pgx.Tx, so the change, its history row and its event
// commit together or not at all. The edge (edge/subscriptions.go) and the watcher
// (processors/subscriptions) share it.
package substore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/outbox"
	"rental/schemas/autorefill"
	"rental/schemas/events"
	"rental/schemas/network"
)

// IDPrefix starts every subscription id.
const IDPrefix = "sub"

// NewID returns a fresh subscription id.
func NewID() string { return events.NewID(IDPrefix) }

// ErrNotFound is an unknown id or another account's subscription.
var ErrNotFound = errors.New("substore: no such subscription")

// Querier is a pool or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Row is a stored subscription.
type Row struct {
	ID, AccountID    string
	Network          network.Network
	Kind             autorefill.Kind
	Receiver         string
	Resource         string
	Mode             autorefill.Mode
	Tier             string
	ThresholdAmount  int64
	RefillAmount     int64
	MaxPriceSun      *int64
	MaxRefillsPerDay *int
	DailyFeeSun      int64
	Status           autorefill.Status
	StatusReason     *string
	SuspendedReqSun  *int64
	Label            *string
	LastRefillAt     *time.Time
	LastOrderID      *string
	RefillsToday     int
	RefillsDay       *time.Time
	RefillSeq        int64
	Preset           *string
	Reserve          *int64
	Low, High        *int64
	FeeSeq           int64
	// FeeCoveredSun is the fee level paid for the current billing day: DailyFeeSun after
	// each daily charge and upgrade charge; a downgrade leaves it (ChargeUpgrade).
	FeeCoveredSun int64
	NextBillingAt *time.Time
	GraceUntil    *time.Time
	NextCheckAt   *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Rule is a plan subscription's rule (zero for legacy ones).
func (r Row) Rule() autorefill.Rule {
	if r.Kind != autorefill.Plan {
		return autorefill.Rule{}
	}
	return autorefill.Rule{Reserve: *r.Reserve, Low: *r.Low, High: *r.High}
}

const columns = `id, account_id, network, kind, receiver, resource, mode, tier, threshold_amount, refill_amount,
	max_price_sun, max_refills_per_day, daily_fee_sun, status, status_reason, suspended_required_sun, label,
	last_refill_at, last_order_id, refills_today, refills_day, refill_seq, preset, reserve, low, high, fee_seq,
	coalesce(fee_covered_sun, daily_fee_sun), next_billing_at, grace_until, next_check_at, created_at, updated_at`

func scan(r pgx.Row) (Row, error) {
	var s Row
	var netw, kind, mode, status string
	err := r.Scan(&s.ID, &s.AccountID, &netw, &kind, &s.Receiver, &s.Resource, &mode, &s.Tier, &s.ThresholdAmount, &s.RefillAmount,
		&s.MaxPriceSun, &s.MaxRefillsPerDay, &s.DailyFeeSun, &status, &s.StatusReason, &s.SuspendedReqSun, &s.Label,
		&s.LastRefillAt, &s.LastOrderID, &s.RefillsToday, &s.RefillsDay, &s.RefillSeq, &s.Preset, &s.Reserve, &s.Low, &s.High, &s.FeeSeq,
		&s.FeeCoveredSun, &s.NextBillingAt, &s.GraceUntil, &s.NextCheckAt, &s.CreatedAt, &s.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, ErrNotFound
	}
	s.Network, s.Kind, s.Mode, s.Status = network.Network(netw), autorefill.Kind(kind), autorefill.Mode(mode), autorefill.Status(status)
	return s, err
}

// Insert stores a new subscription unless the account already has a live one for the
// receiver and resource; then it returns that one's id as existing and stores nothing.
// Concurrent inserts meet on the unique index subscriptions_live: the later one waits for
// the first to commit and then finds it.
func Insert(ctx context.Context, tx pgx.Tx, s Row) (row Row, existing string, err error) {
	row, err = scan(tx.QueryRow(ctx, `INSERT INTO subscriptions (id, account_id, network, kind, receiver, resource, mode, tier,
			threshold_amount, refill_amount, max_price_sun, max_refills_per_day, daily_fee_sun, status, label, preset, reserve, low, high,
			next_check_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'active', $14, $15, $16, $17, $18, $19, $19, $19)
		ON CONFLICT (account_id, receiver, resource) WHERE status <> 'cancelled' DO NOTHING
		RETURNING `+columns,
		s.ID, s.AccountID, string(s.Network), string(s.Kind), s.Receiver, s.Resource, string(s.Mode), s.Tier,
		s.ThresholdAmount, s.RefillAmount, s.MaxPriceSun, s.MaxRefillsPerDay, s.DailyFeeSun, s.Label, s.Preset, s.Reserve, s.Low, s.High,
		s.CreatedAt))
	if errors.Is(err, ErrNotFound) {
		err = tx.QueryRow(ctx, `SELECT id FROM subscriptions WHERE account_id = $1 AND receiver = $2 AND resource = $3 AND status <> 'cancelled'`,
			s.AccountID, s.Receiver, s.Resource).Scan(&existing)
		return Row{}, existing, err
	}
	return row, "", err
}

// Get reads the account's subscription (ErrNotFound for another account's).
func Get(ctx context.Context, q Querier, accountID, id string) (Row, error) {
	return scan(q.QueryRow(ctx, `SELECT `+columns+` FROM subscriptions WHERE id = $1 AND account_id = $2`, id, accountID))
}

// Lock reads and row-locks the account's subscription for a change.
func Lock(ctx context.Context, tx pgx.Tx, accountID, id string) (Row, error) {
	return scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM subscriptions WHERE id = $1 AND account_id = $2 FOR UPDATE`, id, accountID))
}

// OldestDue is the earliest next_check_at of all subscriptions (nil when none has a
// check scheduled), read from the index subscriptions_due.
func OldestDue(ctx context.Context, q Querier) (*time.Time, error) {
	var oldest *time.Time
	err := q.QueryRow(ctx, `SELECT min(next_check_at) FROM subscriptions WHERE next_check_at IS NOT NULL`).Scan(&oldest)
	return oldest, err
}

// ClaimDue locks one subscription whose check is due, skipping rows another watcher
// replica holds: each due subscription is looked at by one replica at a time. ok is false
// when none is due.
func ClaimDue(ctx context.Context, tx pgx.Tx, now time.Time) (Row, bool, error) {
	r, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM subscriptions
		WHERE next_check_at IS NOT NULL AND next_check_at <= $1
		ORDER BY next_check_at LIMIT 1 FOR UPDATE SKIP LOCKED`, now))
	if errors.Is(err, ErrNotFound) {
		return r, false, nil
	}
	return r, err == nil, err
}

// Save writes every mutable column of s (the caller holds the row lock).
func Save(ctx context.Context, tx pgx.Tx, s Row, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE subscriptions SET tier = $2, threshold_amount = $3, refill_amount = $4, max_price_sun = $5,
			max_refills_per_day = $6, daily_fee_sun = $7, status = $8, status_reason = $9, suspended_required_sun = $10, label = $11,
			last_refill_at = $12, last_order_id = $13, refills_today = $14, refills_day = $15, refill_seq = $16, preset = $17,
			reserve = $18, low = $19, high = $20, fee_seq = $21, next_billing_at = $22, grace_until = $23, next_check_at = $24,
			updated_at = $25, cancelled_at = CASE WHEN $8 = 'cancelled' THEN coalesce(cancelled_at, $25) END, fee_covered_sun = $26
		WHERE id = $1`,
		s.ID, s.Tier, s.ThresholdAmount, s.RefillAmount, s.MaxPriceSun, s.MaxRefillsPerDay, s.DailyFeeSun, string(s.Status),
		s.StatusReason, s.SuspendedReqSun, s.Label, s.LastRefillAt, s.LastOrderID, s.RefillsToday, s.RefillsDay, s.RefillSeq, s.Preset,
		s.Reserve, s.Low, s.High, s.FeeSeq, s.NextBillingAt, s.GraceUntil, s.NextCheckAt, now, s.FeeCoveredSun)
	return err
}

// History is one SubscriptionEvent to record.
type History struct {
	Kind        autorefill.HistoryKind
	EnergyDelta *int64
	AmountSun   *int64
	OrderID     *string
	At          time.Time
}

// AddHistory records a SubscriptionEvent.
func AddHistory(ctx context.Context, tx pgx.Tx, subID string, h History) error {
	_, err := tx.Exec(ctx, `INSERT INTO subscription_events (id, subscription_id, kind, energy_delta, amount_sun, order_id, ts)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, events.NewID("sev"), subID, string(h.Kind), h.EnergyDelta, h.AmountSun, h.OrderID, h.At)
	return err
}

// LastHistoryKind is the kind of the subscription's newest SubscriptionEvent ("" when it
// has none).
func LastHistoryKind(ctx context.Context, q Querier, subID string) (autorefill.HistoryKind, error) {
	var last string
	err := q.QueryRow(ctx, `SELECT kind FROM subscription_events WHERE subscription_id = $1 ORDER BY seq DESC LIMIT 1`, subID).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return autorefill.HistoryKind(last), err
}

// RecentHistory is the last n SubscriptionEvents, newest first. A refill's txid is its
// order's first delegation hash once the order delivered (null before).
func RecentHistory(ctx context.Context, q Querier, subID string, n int) ([]autorefill.HistoryEvent, error) {
	rows, err := q.Query(ctx, `SELECT e.id, e.kind, e.energy_delta, e.amount_sun, coalesce(e.txid, o.delegate_hashes[1]), e.ts
		FROM subscription_events e LEFT JOIN orders o ON o.id = e.order_id
		WHERE e.subscription_id = $1 ORDER BY e.seq DESC LIMIT $2`, subID, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []autorefill.HistoryEvent{}
	for rows.Next() {
		var h autorefill.HistoryEvent
		var kind string
		var ts time.Time
		if err := rows.Scan(&h.ID, &kind, &h.EnergyDelta, &h.AmountSun, &h.TxID, &ts); err != nil {
			return nil, err
		}
		h.Kind, h.TS = autorefill.HistoryKind(kind), events.Time(ts)
		out = append(out, h)
	}
	return out, rows.Err()
}

// DelegatedEnergy is the energy this subscription's live orders hold now: orders not
// terminal whose rental has not ended (an order not yet delivered counts with its amount,
// so a top-up in flight already uses its share of the reserve).
func DelegatedEnergy(ctx context.Context, q Querier, subID string, now time.Time) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT coalesce(sum(CASE WHEN status IN ('confirmed', 'active') THEN delivered_amount ELSE amount END), 0)::bigint
		FROM orders WHERE subscription_id = $1 AND resource = 'energy'
		  AND status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active')
		  AND (expires_at IS NULL OR expires_at > $2)`, subID, now).Scan(&n)
	return n, err
}

// OrderState is what the watcher needs to know of a subscription's last order.
type OrderState struct {
	Status    string
	ExpiresAt *time.Time
}

// LastOrder reads the state of an order (ok false when it does not exist).
func LastOrder(ctx context.Context, q Querier, orderID string) (OrderState, bool, error) {
	var s OrderState
	err := q.QueryRow(ctx, `SELECT status, expires_at FROM orders WHERE id = $1`, orderID).Scan(&s.Status, &s.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return s, false, nil
	}
	return s, err == nil, err
}

// AccountFrozen reports whether the account is suspended or closed: it reads, but no
// order is placed and no fee charged for it (rental-api-v1 "Account status").
func AccountFrozen(ctx context.Context, q Querier, accountID string) (bool, error) {
	var st string
	err := q.QueryRow(ctx, `SELECT status FROM accounts WHERE id = $1`, accountID).Scan(&st)
	return st == "suspended" || st == "closed", err
}

// AvailableSun is the account's available balance (balance minus holds).
func AvailableSun(ctx context.Context, q Querier, accountID string) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT coalesce((SELECT balance_sun - reserved_sun FROM ledger_accounts WHERE account_id = $1), 0)`, accountID).Scan(&n)
	return n, err
}

// Emit writes a subscription.* customer event into the outbox in tx (topic
// events.subscriptions.v1, keyed by data.subscription_id).
func Emit(ctx context.Context, tx pgx.Tx, s Row, eventType string, data any) error {
	env, err := events.New(eventType, s.AccountID, s.Network, data)
	if err != nil {
		return err
	}
	return outbox.Insert(ctx, tx, env)
}

// FeeLedger is the part of infra/ledgerstore a fee charge uses (*ledger.Ledger is one).
type FeeLedger interface {
	PlaceHold(ctx context.Context, tx pgx.Tx, accountID, holdRef string, amountSun int64) error
	CaptureHold(ctx context.Context, tx pgx.Tx, holdRef string, amountSun int64) error
}

// FeeRef is the ledger reference of a subscription's n-th daily charge: a retried charge of
// the same day reuses it, so the ledger can never take one day's fee twice.
func FeeRef(subID string, n int64) string { return fmt.Sprintf("subfee:%s:%d", subID, n) }

// ChargeFee charges one day of a plan subscription's fee in tx: a hold of the fee captured
// at once (posting kind capture, customer to revenue, ref capture:subfee:<id>:<n>), a charge
// history row and subscription.charged. It advances s (fee_seq, next_billing_at = from +
// 24 h, grace cleared); the caller saves s. A refusal is the ledger's 4001/4002 with
// required_sun and available_sun, and writes nothing.
func ChargeFee(ctx context.Context, tx pgx.Tx, led FeeLedger, s *Row, from, now time.Time) error {
	next := from.Add(autorefill.BillingDay)
	if err := charge(ctx, tx, led, s, s.DailyFeeSun, next, now); err != nil {
		return err
	}
	s.NextBillingAt, s.GraceUntil = &next, nil
	return nil
}

// ChargeUpgrade charges, in tx, what a plan's new (higher) daily fee costs for the rest of
// the current billing day beyond the level already paid for it
// (autorefill.UpgradeChargeSun), like a daily charge (ledger capture, charge history row,
// subscription.charged with the unchanged next_billing_at) but for that amount, and marks
// the new fee as paid for the day. It charges nothing for a downgrade, for no raise over
// the level paid today, and once next_billing_at passed (the daily charge then takes the
// new fee). s carries the new rule and fee; the caller saves s. A refusal is the ledger's
// 4001/4002 and writes nothing.
func ChargeUpgrade(ctx context.Context, tx pgx.Tx, led FeeLedger, s *Row, now time.Time) error {
	if s.Kind != autorefill.Plan || s.NextBillingAt == nil {
		return nil
	}
	amount := autorefill.UpgradeChargeSun(s.FeeCoveredSun, s.DailyFeeSun, s.NextBillingAt.Sub(now))
	if amount == 0 {
		return nil
	}
	return charge(ctx, tx, led, s, amount, *s.NextBillingAt, now)
}

// charge takes amount of s's fee (the next fee_seq's ledger reference), records it and
// marks s's current fee as paid for the day ending at next.
func charge(ctx context.Context, tx pgx.Tx, led FeeLedger, s *Row, amount int64, next, now time.Time) error {
	ref := FeeRef(s.ID, s.FeeSeq+1)
	if err := led.PlaceHold(ctx, tx, s.AccountID, ref, amount); err != nil {
		return err
	}
	if err := led.CaptureHold(ctx, tx, ref, amount); err != nil {
		return err
	}
	s.FeeSeq++
	s.FeeCoveredSun = s.DailyFeeSun
	if err := AddHistory(ctx, tx, s.ID, History{Kind: autorefill.HistCharge, AmountSun: &amount, At: now}); err != nil {
		return err
	}
	return Emit(ctx, tx, *s, events.EventSubscriptionCharged, events.SubscriptionCharged{
		SubscriptionID: s.ID, Receiver: s.Receiver, Plan: autorefill.PlanName(s.Preset), AmountSun: amount, NextBillingAt: events.Time(next)})
}

// Record renders the Subscription record. delegated is the plan's delegated energy;
// history, when non-nil, becomes events[] (GET of one plan subscription).
func (s Row) Record(delegated int64, history []autorefill.HistoryEvent) autorefill.Record {
	r := autorefill.Record{
		ID: s.ID, Receiver: s.Receiver, Resource: s.Resource, Mode: s.Mode, Tier: s.Tier, ThresholdAmount: s.ThresholdAmount,
		RefillAmount: s.RefillAmount, MaxPriceSun: s.MaxPriceSun, MaxRefillsPerDay: s.MaxRefillsPerDay, DailyFeeSun: s.DailyFeeSun,
		Status: s.Status, StatusReason: s.StatusReason, Label: s.Label, LastRefillAt: timePtr(s.LastRefillAt), LastOrderID: s.LastOrderID,
		RefillsToday: s.RefillsToday, CreatedAt: events.Time(s.CreatedAt), UpdatedAt: events.Time(s.UpdatedAt),
	}
	if s.Kind == autorefill.Plan {
		p := &autorefill.PlanFields{Address: s.Receiver, Preset: s.Preset, Reserve: s.Reserve, Low: s.Low, High: s.High,
			FeeTRXPerDay: float64(s.DailyFeeSun) / float64(autorefill.SunPerTRX), DelegatedEnergy: delegated,
			NextBillingAt: timePtr(s.NextBillingAt), GraceUntil: timePtr(s.GraceUntil)}
		if history != nil {
			h := history
			p.Events = &h
		}
		r.PlanFields = p
	}
	return r
}

func timePtr(t *time.Time) *events.Time {
	if t == nil {
		return nil
	}
	v := events.Time(*t)
	return &v
}
