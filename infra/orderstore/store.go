// Package orderstore persists orders (migration 00010): the order row, its fills, the signer
// journal, the stake pools' allocation locks and the intents that wake the processors. It is
// the only package that writes these tables, each write a named operation (no caller's
// SQL); writes that must share a round trip are queued (Writes, the Queue… functions).
// Every write that changes what a customer sees happens in a caller's transaction together
// with its outbox events.
package orderstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/health"
	"rental/infra/outbox"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
	"rental/schemas/topics"
)

// ErrNotFound is an order that does not exist on the account asking.
var ErrNotFound = errors.New("orderstore: order not found")

// IDPrefix starts every order id.
const IDPrefix = "ord"

// NewID returns a fresh order id.
func NewID() string { return events.NewID(IDPrefix) }

// Querier is a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Row is an order row: the customer-visible record plus what only the pipeline reads.
type Row struct {
	orders.Record
	AccountID           string
	Network             network.Network
	Test                bool
	Activate            bool
	EnergyAmountSun     int64 // the resource part of total_amount_sun
	ActivationAmountSun int64 // the activation part (0 when none)
	QuoteID             *string
	MaxPriceSun         *int64
	ReclaimRequestedAt  *time.Time
	ReclaimHash         *string
	RefundReason        *string
	NextDueAt           *time.Time
	Attempts            int
}

// byIDOnly: the reads of a group's orders by id name no status in SQL and keep the rows
// they want in Go. A status condition lets the planner reach the rows through a partial
// index on status (orders_in_flight, orders_receiver_expiry) instead of the primary key,
// which scans every in-flight order once per read: the plan it takes when statistics last
// saw few orders in flight, exactly when a backlog has since built up.

// toDelegate reports whether an order read by id is one whose allocated delivery is
// delegations to journal or mark: allocating, not an activation order, and its activation
// performed when one was asked.
func toDelegate(status orders.Status, resource orders.Resource, activationSun int64, activationPerformed bool) bool {
	return status == orders.Allocating && resource != orders.Activation && (activationSun == 0 || activationPerformed)
}

// columns is the SELECT list scan reads, in its order.
const columns = `id, account_id, network, test, client_order_id, batch_id, subscription_id, status, resource,
	amount, delivered_amount, partial, tier, duration_seconds, receiver, activate, unit_price_centi,
	energy_amount_sun, activation_amount_sun, total_amount_sun, charged_amount_sun, refunded_amount_sun,
	activation_performed, activation_hash, delegate_hashes, delegated_at, expires_at, failure, filled_by,
	quote_id, max_price_sun, reclaim_requested_at, reclaim_hash, refund_reason, next_due_at, attempts,
	created_at, updated_at, transaction`

func scan(r pgx.Row) (Row, error) {
	var (
		o                      Row
		status, resource, netw string
		unitCenti              int64
		delegatedAt, expiresAt *time.Time
		failure                []byte
		created, updated       time.Time
	)
	err := r.Scan(&o.ID, &o.AccountID, &netw, &o.Test, &o.ClientOrderID, &o.BatchID, &o.SubscriptionID, &status, &resource,
		&o.Amount, &o.DeliveredAmount, &o.Partial, &o.Tier, &o.DurationSeconds, &o.Receiver, &o.Activate, &unitCenti,
		&o.EnergyAmountSun, &o.ActivationAmountSun, &o.TotalAmountSun, &o.ChargedAmountSun, &o.RefundedAmountSun,
		&o.Activation.Performed, &o.Activation.Hash, &o.DelegateHashes, &delegatedAt, &expiresAt, &failure, &o.FilledBy,
		&o.QuoteID, &o.MaxPriceSun, &o.ReclaimRequestedAt, &o.ReclaimHash, &o.RefundReason, &o.NextDueAt, &o.Attempts,
		&created, &updated, &o.Transaction)
	if err != nil {
		return o, err
	}
	o.Status, o.Resource, o.Network = orders.Status(status), orders.Resource(resource), network.Network(netw)
	o.UnitPriceSun = events.Centisun(unitCenti)
	o.Activation.AmountSun = o.ActivationAmountSun
	if o.DelegateHashes == nil {
		o.DelegateHashes = []string{}
	}
	if delegatedAt != nil {
		t := events.Time(*delegatedAt)
		o.DelegatedAt = &t
	}
	if expiresAt != nil {
		t := events.Time(*expiresAt)
		o.ExpiresAt = &t
	}
	if len(failure) > 0 {
		var f orders.Failure
		if err := json.Unmarshal(failure, &f); err != nil {
			return o, fmt.Errorf("orderstore: order %s failure: %w", o.ID, err)
		}
		o.Failure = &f
	}
	o.CreatedAt, o.UpdatedAt = events.Time(created), events.Time(updated)
	return o, nil
}

// NewOrder is what order creation stores.
type NewOrder struct {
	ID                  string
	AccountID           string
	Network             network.Network
	ClientOrderID       string
	BatchID             *string
	SubscriptionID      *string
	Resource            orders.Resource
	Amount              int64
	Tier                *string
	DurationSeconds     *int64
	Receiver            string
	Activate            bool
	UnitPriceCenti      int64
	EnergyAmountSun     int64
	ActivationAmountSun int64
	QuoteID             *string
	MaxPriceSun         *int64
	CreatedAt           time.Time
	// Relay is the customer's transaction an order of POST /v1/transactions relays
	// (relay.go); nil for every other order.
	Relay *NewRelay
}

// Total is what the order charges: the resource plus the activation fee.
func (n NewOrder) Total() int64 { return n.EnergyAmountSun + n.ActivationAmountSun }

// Insert is InsertLimited without a limit.
func Insert(ctx context.Context, tx pgx.Tx, n NewOrder) (Row, error) {
	row, _, err := InsertLimited(ctx, tx, n, 0)
	return row, err
}

// InsertLimited writes a new order in status created, charged its total (the caller places
// the ledger hold in the same tx), and queues its processing intent, all in one statement,
// unless the account already has maxInFlight orders waiting for delivery (maxInFlight <= 0:
// no limit); admitted is false then and nothing was written. Called after the hold, whose
// update of the account's ledger row serialises creations of one account, the count is
// exact. The order is also due 15 s later: should its intent be slow, the processors'
// timer picks the order up anyway (each step reschedules it).
func InsertLimited(ctx context.Context, tx pgx.Tx, n NewOrder, maxInFlight int) (Row, bool, error) {
	b := &pgx.Batch{}
	q, err := QueueInsertLimited(b, n, maxInFlight)
	if err != nil {
		return Row{}, false, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return Row{}, false, fmt.Errorf("orderstore: insert order: %w", err)
	}
	return q.Row, q.Admitted, nil
}

// QueuedInsert is InsertLimited sent in a pgx.Batch with other statements (one round trip
// for all). Once the batch ran, Admitted tells whether the order was written; Row is the
// row as written (known before the statement runs: Created).
type QueuedInsert struct {
	Row      Row
	Admitted bool
}

// QueueInsertLimited queues InsertLimited in b.
func QueueInsertLimited(b *pgx.Batch, n NewOrder, maxInFlight int) (*QueuedInsert, error) {
	if n.ID == "" || n.AccountID == "" || n.ClientOrderID == "" {
		return nil, errors.New("orderstore: order without id, account or client_order_id")
	}
	q := &QueuedInsert{Row: Created(n)}
	created := time.Time(q.Row.CreatedAt)
	intent, _ := json.Marshal(Intent{OrderID: n.ID, Kind: IntentProcess})
	// The intent is written by the same statement, for the order row only if it was.
	enqueue, intentArgs, err := outbox.RecordPerRow("o", "id", 21, topics.OrderIntents, intent,
		map[string]string{"kind": string(IntentProcess)})
	if err != nil {
		return nil, err
	}
	args := []any{n.ID, n.AccountID, string(n.Network), n.ClientOrderID, n.BatchID, n.SubscriptionID, string(n.Resource), n.Amount,
		n.Tier, n.DurationSeconds, n.Receiver, n.Activate, n.UnitPriceCenti, n.EnergyAmountSun, n.ActivationAmountSun,
		n.Total(), n.QuoteID, n.MaxPriceSun, created, maxInFlight}
	args = append(append(args, intentArgs...), *q.Row.NextDueAt)
	b.Queue(`WITH live AS (
			SELECT count(*) AS n FROM orders WHERE account_id = $2 AND status IN ('created', 'paid', 'allocating', 'delegated')
		), o AS (
			INSERT INTO orders (id, account_id, network, client_order_id, batch_id, subscription_id,
				status, resource, amount, tier, duration_seconds, receiver, activate, unit_price_centi, energy_amount_sun,
				activation_amount_sun, total_amount_sun, charged_amount_sun, quote_id, max_price_sun, created_at, updated_at,
				next_due_at)
			SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, 'created', $7::text, $8::bigint, $9::text,
				$10::integer, $11::text, $12::boolean, $13::bigint, $14::bigint, $15::bigint, $16::bigint, $16::bigint,
				$17::text, $18::bigint, $19::timestamptz, $19::timestamptz, $24::timestamptz
			FROM live WHERE $20::integer <= 0 OR live.n < $20::integer
			RETURNING id
		), intent AS (
			`+enqueue+`
		)
		SELECT count(*) FROM o`, args...).
		QueryRow(func(r pgx.Row) error {
			var inserted int
			if err := r.Scan(&inserted); err != nil {
				return err
			}
			q.Admitted = inserted == 1
			return nil
		})
	if n.Relay != nil {
		if err := queueRelay(b, n); err != nil {
			return nil, err
		}
	}
	return q, nil
}

// InsertRefused records an order that was refused when it was placed on the account's
// behalf (a batch receiver the balance could not pay, say): status failed with the
// refusal as its failure, nothing charged, no price, no processing, and order.failed
// (refund_complete true: there is nothing to reverse) in the same transaction. It keeps
// the spec's rule that a batch of N receivers yields N order events. Only n's identity
// fields (id, account, network, client_order_id, batch, subscription, resource, amount,
// tier, receiver, activate, created_at) are used.
func InsertRefused(ctx context.Context, tx pgx.Tx, n NewOrder, f orders.Failure) (Row, error) {
	if n.ID == "" || n.AccountID == "" || n.ClientOrderID == "" {
		return Row{}, errors.New("orderstore: order without id, account or client_order_id")
	}
	created := n.CreatedAt.UTC().Truncate(time.Millisecond)
	row, err := scan(tx.QueryRow(ctx, `INSERT INTO orders (id, account_id, network, client_order_id, batch_id, subscription_id,
			status, resource, amount, tier, duration_seconds, receiver, activate, unit_price_centi, energy_amount_sun,
			activation_amount_sun, total_amount_sun, charged_amount_sun, failure, ended_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, 'failed', $7, $8, $9, $10, $11, $12, 0, 0, 0, 0, 0, $13, $14, $14, $14)
		RETURNING `+columns,
		n.ID, n.AccountID, string(n.Network), n.ClientOrderID, n.BatchID, n.SubscriptionID, string(n.Resource), n.Amount,
		n.Tier, n.DurationSeconds, n.Receiver, n.Activate, f, created))
	if err != nil {
		return Row{}, fmt.Errorf("orderstore: insert refused order: %w", err)
	}
	env, err := events.New(orders.EventFailed, row.AccountID, row.Network, row.Record.FailedEvent(true))
	if err != nil {
		return Row{}, err
	}
	return row, outbox.Insert(ctx, tx, env)
}

// Created is the row InsertLimited writes for n, as Get would read it back.
func Created(n NewOrder) Row {
	created := n.CreatedAt.UTC().Truncate(time.Millisecond)
	due := created.Add(15 * time.Second)
	total := n.Total()
	return Row{
		Record: orders.Record{
			ID: n.ID, ClientOrderID: n.ClientOrderID, BatchID: n.BatchID, SubscriptionID: n.SubscriptionID,
			Status: orders.Created, Resource: n.Resource, Amount: n.Amount, Tier: n.Tier,
			DurationSeconds: n.DurationSeconds, Receiver: n.Receiver, UnitPriceSun: events.Centisun(n.UnitPriceCenti),
			TotalAmountSun: total, ChargedAmountSun: total,
			Activation:     orders.ActivationInfo{AmountSun: n.ActivationAmountSun},
			DelegateHashes: []string{},
			CreatedAt:      events.Time(created), UpdatedAt: events.Time(created),
		},
		AccountID: n.AccountID, Network: n.Network, Activate: n.Activate, EnergyAmountSun: n.EnergyAmountSun,
		ActivationAmountSun: n.ActivationAmountSun, QuoteID: n.QuoteID, MaxPriceSun: n.MaxPriceSun, NextDueAt: &due,
	}.withRelay(n.Relay)
}

// Get reads one order of accountID; another account's order is ErrNotFound.
func Get(ctx context.Context, q Querier, accountID, id string) (Row, error) {
	row, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM orders WHERE id = $1 AND account_id = $2`, id, accountID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, ErrNotFound
	}
	return row, err
}

// Lock reads one order FOR UPDATE inside tx: the order's state changes serialise on it.
func Lock(ctx context.Context, tx pgx.Tx, id string) (Row, error) {
	row, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM orders WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, ErrNotFound
	}
	return row, err
}

// QueuedLock is Lock queued in a pgx.Batch: once the batch ran, Row is the order, or Err
// ErrNotFound (the batch itself does not fail for a missing order).
type QueuedLock struct {
	Row Row
	Err error
}

// QueueLock queues Lock in b, so that reads made under the lock ride in the same round trip.
func QueueLock(b *pgx.Batch, id string) *QueuedLock {
	q := &QueuedLock{}
	b.Queue(`SELECT `+columns+` FROM orders WHERE id = $1 FOR UPDATE`, id).QueryRow(func(r pgx.Row) error {
		row, err := scan(r)
		if errors.Is(err, pgx.ErrNoRows) {
			q.Err = ErrNotFound
			return nil
		}
		q.Row = row
		return err
	})
	return q
}

// InFlight counts the account's orders still waiting for delivery (the 1101 limit).
func InFlight(ctx context.Context, q Querier, accountID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM orders WHERE account_id = $1 AND status IN ('created', 'paid', 'allocating', 'delegated')`,
		accountID).Scan(&n)
	return n, err
}

// IntentKind names the work an intent asks of the order processor.
type IntentKind string

const (
	IntentProcess IntentKind = "process" // advance the order as far as it can go now
	IntentReclaim IntentKind = "reclaim" // the customer asked for an early return
)

// Intent is the value of a record on topics.OrderIntents.
type Intent struct {
	OrderID string     `json:"order_id"`
	Kind    IntentKind `json:"kind"`
}

// Enqueue writes an intent for orderID into the outbox inside tx: it reaches a processor
// exactly when tx commits. The processor re-reads the order, so intents carry no state.
func Enqueue(ctx context.Context, tx pgx.Tx, orderID string, kind IntentKind) error {
	v, _ := json.Marshal(Intent{OrderID: orderID, Kind: kind})
	return outbox.InsertRecord(ctx, tx, topics.OrderIntents, orderID, v, map[string]string{"kind": string(kind)})
}

// DeliveredSince is the energy delivered on the network from the UTC day of since on (the
// price table's delivered_today, since being a UTC midnight), by day of delegation: every
// delivered energy order counts, whatever happened after. It reads the running totals
// ConfirmMany keeps (energy_delivered_days), a few rows a day.
func DeliveredSince(ctx context.Context, q Querier, n network.Network, since time.Time) (int64, error) {
	var sum int64
	err := q.QueryRow(ctx, `SELECT coalesce(sum(energy), 0)::bigint FROM energy_delivered_days
		WHERE network = $1 AND day >= ($2::timestamptz AT TIME ZONE 'UTC')::date`, string(n), since).Scan(&sum)
	return sum, err
}

// LiveRefs tells the ledger's invariants check which hold references belong to a live
// order (ledger.LiveRefs): a hold is placed at creation and captured at confirmation or
// failure, so a placed hold is legitimate only while its order still waits for delivery.
func LiveRefs(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, refs []string) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT id FROM orders WHERE id = ANY($1) AND (status IN ('created', 'paid', 'allocating', 'delegated')) IS TRUE`, refs) // a key lookup's guard (pg/plans.go)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	live := make(map[string]bool, len(ids))
	for _, id := range ids {
		live[id] = true
	}
	return live, nil
}

// DeliveryStats reads the last hour of orders for GET /v1/status (health.DeliveryStats):
// orders created in the hour, how many of them failed, and the median seconds from creation
// to the delegation's block among those delivered.
type DeliveryStats struct{ Pool Querier }

func (d DeliveryStats) DeliveryLastHour(ctx context.Context) (health.DeliveryWindow, error) {
	var w health.DeliveryWindow
	var median *float64
	// Orders refused at placement (InsertRefused: never charged) were no delivery attempt.
	err := d.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'failed'),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM delegated_at - created_at))
				FILTER (WHERE delegated_at IS NOT NULL)
		FROM orders WHERE created_at > now() - interval '1 hour' AND charged_amount_sun > 0`).Scan(&w.Orders, &w.Failed, &median)
	if err != nil {
		return w, err
	}
	if median != nil {
		s := int64(math.Round(max(*median, 0)))
		w.MedianDeliverySeconds = &s
	}
	return w, nil
}

// GetAny reads one order whatever its account (support tooling); ErrNotFound when none.
func GetAny(ctx context.Context, q Querier, id string) (Row, error) {
	row, err := scan(q.QueryRow(ctx, `SELECT `+columns+` FROM orders WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, ErrNotFound
	}
	return row, err
}
