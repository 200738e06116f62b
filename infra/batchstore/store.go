// Package batchstore persists batches (migration 00013): the batch row, its receiver rows
// and the transitions between receiver states. Every transition that can end a batch goes
// through Resolve, which gives the batch its final status and writes batch.completed in the
// caller's transaction, once.
//
// Lock order, the same for every caller so that none can deadlock with another: receiver
// rows first (in index order when several), then the batch row. The batch processor's
// placement takes the account's ledger row between the two (inside PlaceTx), and nothing
// that holds a batch row waits for a receiver or a ledger row.
package batchstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/outbox"
	"rental/schemas/batches"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// IDPrefix starts every batch id.
const IDPrefix = "bat"

// NewID returns a fresh batch id.
func NewID() string { return events.NewID(IDPrefix) }

// ErrNotFound is a batch that does not exist on the account asking.
var ErrNotFound = errors.New("batchstore: batch not found")

// Querier is a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NewReceiver is one receiver of a batch being created; Amount and Activate are resolved
// (the batch default applied).
type NewReceiver struct {
	Receiver string
	Amount   int64
	Activate bool
}

// NewBatch is what batch creation stores.
type NewBatch struct {
	ID            string
	AccountID     string
	Network       network.Network
	ClientBatchID string
	Resource      string
	Tier          string
	Amount        *int64 // the request's default amount, shown in the record
	Activate      bool   // the request's default
	MaxPriceSun   *int64
	Receivers     []NewReceiver
	CreatedAt     time.Time
}

// LockAccount serialises batch creations of one account until tx ends (a transaction-scoped
// advisory lock), so that OpenCount is exact when the new batch is admitted.
func LockAccount(ctx context.Context, tx pgx.Tx, accountID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('batches.account:' || $1, 0))`, accountID)
	return err
}

// OpenCount is how many batches of the account are still processing.
func OpenCount(ctx context.Context, q Querier, accountID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM batches WHERE account_id = $1 AND status = 'processing'`, accountID).Scan(&n)
	return n, err
}

// Insert writes the batch (status processing) and its receivers (pending, due at once) in
// tx. The pending receivers are the processing intent: the processor claims them.
func Insert(ctx context.Context, tx pgx.Tx, n NewBatch) error {
	if n.ID == "" || n.AccountID == "" || n.ClientBatchID == "" || len(n.Receivers) == 0 {
		return errors.New("batchstore: batch without id, account, client_batch_id or receivers")
	}
	at := n.CreatedAt.UTC().Truncate(time.Millisecond)
	if _, err := tx.Exec(ctx, `INSERT INTO batches (id, account_id, network, client_batch_id, status, resource, tier, amount,
			activate, max_price_sun, total, open_receivers, created_at, updated_at)
		VALUES ($1, $2, $3, $4, 'processing', $5, $6, $7, $8, $9, $10, $10, $11, $11)`,
		n.ID, n.AccountID, string(n.Network), n.ClientBatchID, n.Resource, n.Tier, n.Amount, n.Activate, n.MaxPriceSun,
		len(n.Receivers), at); err != nil {
		return fmt.Errorf("batchstore: insert batch: %w", err)
	}
	addrs := make([]string, len(n.Receivers))
	amounts := make([]int64, len(n.Receivers))
	activate := make([]bool, len(n.Receivers))
	for i, r := range n.Receivers {
		addrs[i], amounts[i], activate[i] = r.Receiver, r.Amount, r.Activate
	}
	if _, err := tx.Exec(ctx, `INSERT INTO batch_receivers (batch_id, idx, receiver, amount, activate, state, due_at, updated_at)
		SELECT $1, r.ord - 1, r.receiver, r.amount, r.activate, 'pending', $5, $5
		FROM unnest($2::text[], $3::bigint[], $4::boolean[]) WITH ORDINALITY AS r (receiver, amount, activate, ord)`,
		n.ID, addrs, amounts, activate, at); err != nil {
		return fmt.Errorf("batchstore: insert receivers: %w", err)
	}
	return nil
}

// Batch is a batch row with the record the endpoints show.
type Batch struct {
	batches.Record
	AccountID string
	Network   network.Network
}

// Get reads the account's batch with its receivers. While the batch is open, the charged
// amount and each receiver's are read live from its orders (charged less refunded); once it
// finished, the batch's is the figure batch.completed carried.
func Get(ctx context.Context, q Querier, accountID, id string) (Batch, error) {
	var (
		b                      Batch
		status, netw           string
		created, updated       time.Time
		finished               *time.Time
		storedCharged, liveSum int64
	)
	err := q.QueryRow(ctx, `SELECT id, account_id, network, client_batch_id, status, resource, tier, amount, activate,
			max_price_sun, charged_amount_sun, created_at, updated_at, finished_at
		FROM batches WHERE id = $1 AND account_id = $2`, id, accountID).Scan(&b.ID, &b.AccountID, &netw, &b.ClientBatchID,
		&status, &b.Resource, &b.Tier, &b.Amount, &b.Activate, &b.MaxPriceSun, &storedCharged, &created, &updated, &finished)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, ErrNotFound
	}
	if err != nil {
		return b, err
	}
	b.Status, b.Network = batches.Status(status), network.Network(netw)
	b.CreatedAt, b.UpdatedAt = events.Time(created), events.Time(updated)
	if finished != nil {
		t := events.Time(*finished)
		b.FinishedAt = &t
	}
	rows, err := q.Query(ctx, `SELECT r.idx, r.receiver, r.amount, r.activate, r.state, r.order_id, r.error, r.finished_at,
			COALESCE(o.charged_amount_sun - o.refunded_amount_sun, 0)
		FROM batch_receivers r LEFT JOIN orders o ON o.id = r.order_id
		WHERE r.batch_id = $1 ORDER BY r.idx`, id)
	if err != nil {
		return b, err
	}
	defer rows.Close()
	b.Receivers = []batches.Receiver{}
	for rows.Next() {
		var (
			r        batches.Receiver
			state    string
			errJSON  []byte
			finished *time.Time
		)
		if err := rows.Scan(&r.Index, &r.Receiver, &r.Amount, &r.Activate, &state, &r.OrderID, &errJSON, &finished,
			&r.ChargedAmountSun); err != nil {
			return b, err
		}
		r.Status = batches.State(state)
		if len(errJSON) > 0 {
			var e batches.ReceiverError
			if err := json.Unmarshal(errJSON, &e); err != nil {
				return b, fmt.Errorf("batchstore: batch %s receiver %d error: %w", id, r.Index, err)
			}
			r.Error = &e
		}
		if finished != nil {
			t := events.Time(*finished)
			r.FinishedAt = &t
		}
		b.Summary.Count(r.Status)
		liveSum += r.ChargedAmountSun
		b.Receivers = append(b.Receivers, r)
	}
	if err := rows.Err(); err != nil {
		return b, err
	}
	b.ChargedAmountSun = liveSum
	if b.Status != batches.Processing {
		b.ChargedAmountSun = storedCharged
	}
	return b, nil
}

// Claimed is a pending receiver the processor locked, with what placing its order needs.
type Claimed struct {
	BatchID     string
	Index       int
	AccountID   string
	Network     network.Network
	Receiver    string
	Amount      int64
	Activate    bool
	Resource    string
	Tier        string
	MaxPriceSun *int64
	Attempts    int
	// AccountStatus is the account's status at the claim: a suspended or closed account
	// places no orders.
	AccountStatus string
}

// ClientOrderID is the client_order_id of the receiver's order: derived from the batch and
// the receiver's index, so a placement retried after a crash finds the order it placed.
func (c Claimed) ClientOrderID() string { return fmt.Sprintf("%s:%d", c.BatchID, c.Index) }

// ClaimDue locks one pending receiver due at now, skipping receivers another replica holds,
// oldest first; ok is false when none is due. The lock lasts until tx ends.
func ClaimDue(ctx context.Context, tx pgx.Tx, now time.Time) (Claimed, bool, error) {
	var c Claimed
	var netw string
	err := tx.QueryRow(ctx, `SELECT r.batch_id, r.idx, b.account_id, b.network, r.receiver, r.amount, r.activate,
			b.resource, b.tier, b.max_price_sun, r.attempts, a.status
		FROM batch_receivers r JOIN batches b ON b.id = r.batch_id JOIN accounts a ON a.id = b.account_id
		WHERE r.state = 'pending' AND r.due_at <= $1
		ORDER BY r.due_at, r.batch_id, r.idx LIMIT 1
		FOR UPDATE OF r SKIP LOCKED`, now).Scan(&c.BatchID, &c.Index, &c.AccountID, &netw, &c.Receiver, &c.Amount,
		&c.Activate, &c.Resource, &c.Tier, &c.MaxPriceSun, &c.Attempts, &c.AccountStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	c.Network = network.Network(netw)
	return c, err == nil, err
}

// PlacedOrder returns the id of the receiver's order when a placement found it placed
// before: the batch's order with the receiver's client_order_id on the account.
func PlacedOrder(ctx context.Context, q Querier, c Claimed) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM orders WHERE account_id = $1 AND client_order_id = $2 AND batch_id = $3`,
		c.AccountID, c.ClientOrderID(), c.BatchID).Scan(&id)
	return id, err
}

// MarkPlaced records the receiver's order. The receiver must be pending and locked by tx.
func MarkPlaced(ctx context.Context, tx pgx.Tx, batchID string, idx int, orderID string, now time.Time) error {
	tag, err := tx.Exec(ctx, `UPDATE batch_receivers SET state = 'placed', order_id = $3, due_at = NULL,
			attempts = attempts + 1, updated_at = $4
		WHERE batch_id = $1 AND idx = $2 AND state = 'pending'`, batchID, idx, orderID, now)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("batchstore: receiver %s/%d is not pending", batchID, idx)
	}
	return touch(ctx, tx, batchID, now)
}

// AttachOrder records the order of a receiver refused at placement (orderstore.InsertRefused):
// the receiver keeps its outcome, the failed order is its order.
func AttachOrder(ctx context.Context, tx pgx.Tx, batchID string, idx int, orderID string) error {
	_, err := tx.Exec(ctx, `UPDATE batch_receivers SET order_id = $3 WHERE batch_id = $1 AND idx = $2`, batchID, idx, orderID)
	return err
}

// Postpone leaves the receiver pending until due (a placement refused for a reason that
// passes, such as the account's in-flight limit).
func Postpone(ctx context.Context, tx pgx.Tx, batchID string, idx int, due, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE batch_receivers SET due_at = $3, attempts = attempts + 1, updated_at = $4
		WHERE batch_id = $1 AND idx = $2 AND state = 'pending'`, batchID, idx, due, now)
	return err
}

func touch(ctx context.Context, tx pgx.Tx, batchID string, now time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE batches SET updated_at = GREATEST(updated_at, $2) WHERE id = $1`, batchID, now)
	return err
}

// Finished is a batch that Resolve or Cancel ended: the data its batch.completed carried.
type Finished struct {
	AccountID string
	Data      batches.CompletedData
}

// Resolve gives the receiver its final outcome when it is in one of the states from; the
// receiver is locked by the UPDATE (a caller holding its lock already is fine). It reports
// whether the receiver changed, and the finished batch when this outcome was the batch's
// last open one: the batch then has its final status and batch.completed is in the outbox,
// all in tx. A receiver already final (a redelivered event, a second replica) changes
// nothing and ends nothing.
func Resolve(ctx context.Context, tx pgx.Tx, batchID string, idx int, from []batches.State, to batches.State,
	rerr *batches.ReceiverError, now time.Time) (bool, *Finished, error) {
	if !to.Final() {
		return false, nil, fmt.Errorf("batchstore: %s is not a final outcome", to)
	}
	var errJSON []byte
	if rerr != nil {
		var err error
		if errJSON, err = json.Marshal(rerr); err != nil {
			return false, nil, err
		}
	}
	fromS := make([]string, len(from))
	for i, s := range from {
		fromS[i] = string(s)
	}
	tag, err := tx.Exec(ctx, `UPDATE batch_receivers SET state = $3, error = COALESCE($4, error), due_at = NULL,
			finished_at = $5, updated_at = $5
		WHERE batch_id = $1 AND idx = $2 AND state = ANY($6)`, batchID, idx, string(to), errJSON, now, fromS)
	if err != nil {
		return false, nil, err
	}
	if tag.RowsAffected() == 0 {
		return false, nil, nil
	}
	f, err := closeReceivers(ctx, tx, batchID, 1, now)
	return true, f, err
}

// closeReceivers counts n receivers of the batch as final, under the batch row's lock, and
// finishes the batch when none is left open.
func closeReceivers(ctx context.Context, tx pgx.Tx, batchID string, n int, now time.Time) (*Finished, error) {
	var open int
	if err := tx.QueryRow(ctx, `UPDATE batches SET open_receivers = open_receivers - $2, updated_at = GREATEST(updated_at, $3)
		WHERE id = $1 RETURNING open_receivers`, batchID, n, now).Scan(&open); err != nil {
		return nil, fmt.Errorf("batchstore: close receivers of %s: %w", batchID, err)
	}
	if open > 0 {
		return nil, nil
	}
	return finish(ctx, tx, batchID, now)
}

// finish sets the batch's final status and writes batch.completed. The caller holds the
// batch row's lock and every receiver is final, so the summary is the final one; the
// status guard makes a second call a no-op.
func finish(ctx context.Context, tx pgx.Tx, batchID string, now time.Time) (*Finished, error) {
	var s batches.Summary
	rows, err := tx.Query(ctx, `SELECT state FROM batch_receivers WHERE batch_id = $1`, batchID)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var st string
		if err := rows.Scan(&st); err != nil {
			rows.Close()
			return nil, err
		}
		s.Count(batches.State(st))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if s.Open() != 0 {
		return nil, fmt.Errorf("batchstore: batch %s has %d open receivers but its counter reached 0", batchID, s.Open())
	}
	// What the batch's orders finally charged: each order's charge less what was given back
	// (pro-rata refunds of partial deliveries, reversals of failed orders).
	var charged int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE(sum(charged_amount_sun - refunded_amount_sun), 0)::bigint FROM orders
		WHERE id IN (SELECT order_id FROM batch_receivers WHERE batch_id = $1 AND order_id IS NOT NULL)`, batchID).Scan(&charged); err != nil {
		return nil, err
	}
	status := s.FinalStatus()
	at := now.UTC().Truncate(time.Millisecond)
	var (
		f         Finished
		netw      string
		clientBID string
	)
	err = tx.QueryRow(ctx, `UPDATE batches SET status = $2, finished_at = $3, charged_amount_sun = $4, updated_at = $3
		WHERE id = $1 AND status = 'processing' RETURNING account_id, network, client_batch_id`,
		batchID, string(status), at, charged).Scan(&f.AccountID, &netw, &clientBID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // finished before: its event was written then
	}
	if err != nil {
		return nil, err
	}
	f.Data = batches.CompletedData{BatchID: batchID, ClientBatchID: clientBID, Status: status, Summary: s,
		ChargedAmountSun: charged, FinishedAt: events.Time(at)}
	env, err := events.New(batches.EventCompleted, f.AccountID, network.Network(netw), f.Data)
	if err != nil {
		return nil, err
	}
	env.CreatedAt = events.Time(at)
	if err := outbox.Insert(ctx, tx, env); err != nil {
		return nil, err
	}
	return &f, nil
}

// PlacedRef is a placed receiver and its order.
type PlacedRef struct {
	BatchID string
	Index   int
	OrderID string
}

// ResolveOrder gives the receiver of orderID the outcome its order has now, when the order
// has a final one (confirmed and after: completed or partial; failed: failed) and the
// receiver is still placed. to is "" when the order is no batch receiver's, is not final
// yet, or was resolved before. Safe to repeat: the state guard applies it once.
func ResolveOrder(ctx context.Context, tx pgx.Tx, orderID string, now time.Time) (to batches.State, f *Finished, err error) {
	var (
		ref     PlacedRef
		status  string
		partial bool
		failure []byte
	)
	err = tx.QueryRow(ctx, `SELECT r.batch_id, r.idx, o.status, o.partial, o.failure
		FROM batch_receivers r JOIN orders o ON o.id = r.order_id
		WHERE r.order_id = $1 AND r.state = 'placed' FOR UPDATE OF r`, orderID).Scan(&ref.BatchID, &ref.Index, &status, &partial, &failure)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	to, final := batches.OrderOutcome(orders.Status(status), partial)
	if !final {
		return "", nil, nil
	}
	var rerr *batches.ReceiverError
	if to == batches.StateFailed && len(failure) > 0 {
		var of orders.Failure
		if err := json.Unmarshal(failure, &of); err == nil {
			rerr = &batches.ReceiverError{Code: of.Code, Slug: of.Slug, Message: of.Message}
		}
	}
	changed, f, err := Resolve(ctx, tx, ref.BatchID, ref.Index, []batches.State{batches.Placed}, to, rerr, now)
	if !changed {
		to = ""
	}
	return to, f, err
}

// DecidedOrders lists up to n orders of placed receivers that already have a final outcome
// (the sweep's safety net behind the order-event consumer).
func DecidedOrders(ctx context.Context, q Querier, n int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT r.order_id FROM batch_receivers r JOIN orders o ON o.id = r.order_id
		WHERE r.state = 'placed' AND o.status IN ('confirmed', 'active', 'expired', 'reclaimed', 'refunded', 'failed')
		LIMIT $1`, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ErrBatchFinished is a cancel of a batch that already ended.
var ErrBatchFinished = errors.New("batchstore: batch finished")

// NotCancellable is a cancel naming receivers that are not pending (picked up, or final),
// or a cancel that finds no pending receiver at all (Receivers empty then).
type NotCancellable struct {
	Receivers []string
}

// NotInBatch is a cancel naming addresses that are no receiver of the batch.
type NotInBatch struct {
	Receivers []string
}

func (e *NotInBatch) Error() string {
	return fmt.Sprintf("batchstore: not receivers of the batch: %v", e.Receivers)
}

func (e *NotCancellable) Error() string {
	return fmt.Sprintf("batchstore: receivers not cancellable: %v", e.Receivers)
}

// Cancel cancels the account's batch's pending receivers: all of them when only is empty,
// else exactly those named (every one must be pending, else nothing is cancelled and
// *NotCancellable names the others). Receivers another transaction holds (being placed
// right now) are waited for, so the answer is exact. It returns the finished batch when the
// cancel ended it (batch.completed then written in tx).
func Cancel(ctx context.Context, tx pgx.Tx, accountID, batchID string, only []string, now time.Time) (*Finished, error) {
	var status string
	err := tx.QueryRow(ctx, `SELECT status FROM batches WHERE id = $1 AND account_id = $2`, batchID, accountID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if batches.Status(status) != batches.Processing {
		return nil, ErrBatchFinished
	}
	// Receiver rows first, in index order (the store's lock order).
	rows, err := tx.Query(ctx, `SELECT idx, receiver, state FROM batch_receivers WHERE batch_id = $1 ORDER BY idx FOR UPDATE`, batchID)
	if err != nil {
		return nil, err
	}
	type rc struct {
		idx      int
		receiver string
		state    batches.State
	}
	var all []rc
	for rows.Next() {
		var r rc
		var st string
		if err := rows.Scan(&r.idx, &r.receiver, &st); err != nil {
			rows.Close()
			return nil, err
		}
		r.state = batches.State(st)
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// With every receiver locked nothing can end the batch any more; it may have ended
	// between the first read and the locks.
	if err := tx.QueryRow(ctx, `SELECT status FROM batches WHERE id = $1`, batchID).Scan(&status); err != nil {
		return nil, err
	}
	if batches.Status(status) != batches.Processing {
		return nil, ErrBatchFinished
	}
	var targets []int
	if len(only) == 0 {
		for _, r := range all {
			if r.state == batches.Pending {
				targets = append(targets, r.idx)
			}
		}
		if len(targets) == 0 {
			return nil, &NotCancellable{}
		}
	} else {
		byAddr := map[string]rc{}
		for _, r := range all {
			byAddr[r.receiver] = r
		}
		var bad, unknown []string
		for _, a := range only {
			r, ok := byAddr[a]
			switch {
			case !ok:
				unknown = append(unknown, a)
			case r.state != batches.Pending:
				bad = append(bad, a)
			default:
				targets = append(targets, r.idx)
			}
		}
		if len(unknown) > 0 {
			return nil, &NotInBatch{Receivers: unknown}
		}
		if len(bad) > 0 {
			return nil, &NotCancellable{Receivers: bad}
		}
	}
	tag, err := tx.Exec(ctx, `UPDATE batch_receivers SET state = 'cancelled', due_at = NULL, finished_at = $3, updated_at = $3
		WHERE batch_id = $1 AND idx = ANY($2) AND state = 'pending'`, batchID, targets, now)
	if err != nil {
		return nil, err
	}
	if int(tag.RowsAffected()) != len(targets) {
		return nil, fmt.Errorf("batchstore: cancelled %d of %d locked pending receivers", tag.RowsAffected(), len(targets))
	}
	return closeReceivers(ctx, tx, batchID, len(targets), now)
}
