package orderstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rental/infra/pg"
	"rental/schemas/orders"
)

// The order processor's writes (processors/orderflow): the transitions of docs/
// order-processing.md, the due-time timer and the delivery's fields. Each runs inside the
// step's transaction, which holds the order's row lock (BeginLocked), unless it says
// otherwise.

// DB is a pool or a transaction.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Locked is an order as read under its row lock, with its journal and fills as they were
// then.
type Locked struct {
	Row     Row
	Journal []JournalEntry
	Fills   []Fill
}

// begin is pg.BeginWith for the order processor's transactions, which plan their
// statements by their indexes (pg.IndexPlans): each reaches its rows by key (an order's id,
// a transaction id, a pool's address), and a plan cached while the tables were small would
// otherwise scan them whole as a backlog grows.
func begin(ctx context.Context, conn *pgx.Conn, b *pgx.Batch) (pgx.Tx, error) {
	b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: pg.IndexPlans}}, b.QueuedQueries...)
	return pg.BeginWith(ctx, conn, b)
}

// BeginLocked begins a transaction on conn that holds the order's row lock, and reads the
// order, its journal and its fills under it: BEGIN, the lock and the reads travel in one
// round trip (pg.BeginWith). A missing order is ErrNotFound, with no transaction left open.
func BeginLocked(ctx context.Context, conn *pgx.Conn, orderID string) (pgx.Tx, Locked, error) {
	b := &pgx.Batch{}
	lock := QueueLock(b, orderID)
	var l Locked
	b.Queue(journalSQL, orderID).Query(func(rows pgx.Rows) (err error) {
		l.Journal, err = scanJournal(rows)
		return err
	})
	b.Queue(fillsSQL, orderID).Query(func(rows pgx.Rows) (err error) {
		l.Fills, err = scanFills(rows)
		return err
	})
	tx, err := begin(ctx, conn, b)
	if err != nil {
		return nil, l, err
	}
	if lock.Err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, l, lock.Err
	}
	l.Row = lock.Row
	return tx, l, nil
}

// Applied is what BeginLockedOnFact's application of the block result found: Done when
// it changed the journal row (Was is the row's state before), false when the result was
// applied before.
type Applied struct {
	Done bool
	Was  string
}

// BeginLockedOnFact is BeginLocked for the order of the journaled transaction txID, with
// the transaction's block result from its chain fact applied under the order's lock before
// the journal is read (as ApplyBlockResult, which it replaces: the fact's journal update
// commits with the step it advances, in the same round trip as the lock). A transaction
// that is not journaled is ErrNotFound, with no transaction left open.
func BeginLockedOnFact(ctx context.Context, conn *pgx.Conn, txID, state, result string, blockNum int64, blockTime time.Time) (pgx.Tx, Locked, Applied, error) {
	b := &pgx.Batch{}
	lock := &QueuedLock{}
	b.Queue(`SELECT `+columns+` FROM orders WHERE id = (SELECT order_id FROM signed_txs WHERE txid = $1) FOR UPDATE`, txID).
		QueryRow(func(r pgx.Row) error {
			row, err := scan(r)
			if errors.Is(err, pgx.ErrNoRows) {
				lock.Err = ErrNotFound
				return nil
			}
			lock.Row = row
			return err
		})
	var a Applied
	b.Queue(applyBlockResultSQL, txID, state, result, blockNum, blockTime).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var orderID string
			if err := rows.Scan(&orderID, &a.Was); err != nil {
				return err
			}
			a.Done = true
		}
		return rows.Err()
	})
	var l Locked
	b.Queue(`SELECT txid, purpose, fill_seq, attempt, tx, expiration, state, result, block_time
		FROM signed_txs WHERE order_id = (SELECT order_id FROM signed_txs WHERE txid = $1) ORDER BY purpose, fill_seq, attempt`, txID).
		Query(func(rows pgx.Rows) (err error) {
			l.Journal, err = scanJournal(rows)
			return err
		})
	b.Queue(`SELECT seq, source, pool_address, amount, balance_sun, state FROM order_fills
		WHERE order_id = (SELECT order_id FROM signed_txs WHERE txid = $1) ORDER BY seq`, txID).
		Query(func(rows pgx.Rows) (err error) {
			l.Fills, err = scanFills(rows)
			return err
		})
	tx, err := begin(ctx, conn, b)
	if err != nil {
		return nil, l, a, err
	}
	if lock.Err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, l, a, lock.Err
	}
	l.Row = lock.Row
	return tx, l, a, nil
}

// Writes are the processor's writes queued to travel together in one round trip (Send):
// a step under the stake pools' locks, or the marks of several fills, keeps its round
// trips to one. Answers of queued reads are there once Send returned.
type Writes struct {
	b pgx.Batch
	// The writes a group makes once per order (ReserveFill, Allocated, Signed) are kept as
	// rows and sent as one statement per kind (flush): a group of N orders sends three
	// statements where it sent up to 3N. They are flushed before any other statement is
	// queued, so only they change places among themselves: fills, then the orders' moves,
	// then the journal rows, which depend on nothing the other two write.
	fills  []fillRow
	allocs []allocRow
	signed []signedRow
}

type fillRow struct {
	orderID string
	n       NewFill
}

type allocRow struct {
	orderID, filledBy string
	due               time.Time
}

type signedRow struct {
	s    Signed
	body string
}

// queue queues one statement after the rows kept so far.
func (w *Writes) queue(sql string, args ...any) *pgx.QueuedQuery {
	w.flush()
	return w.b.Queue(sql, args...)
}

// flush queues the rows kept, one statement per kind.
func (w *Writes) flush() {
	if n := len(w.fills); n > 0 {
		ids, seqs, sources, pools, amounts, suns := make([]string, n), make([]int32, n), make([]string, n), make([]*string, n), make([]int64, n), make([]int64, n)
		for i, f := range w.fills {
			ids[i], seqs[i], sources[i], amounts[i], suns[i] = f.orderID, int32(f.n.Seq), f.n.Source, f.n.Amount, f.n.BalanceSun
			if f.n.Pool != "" {
				pools[i] = &f.n.Pool
			}
		}
		w.b.Queue(`INSERT INTO order_fills (order_id, seq, source, pool_address, amount, balance_sun, state)
			SELECT o, s, src, p, a, b, 'reserved'
			FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::bigint[], $6::bigint[]) AS u(o, s, src, p, a, b)`,
			ids, seqs, sources, pools, amounts, suns)
		w.fills = nil
	}
	if n := len(w.allocs); n > 0 {
		ids, by, due := make([]string, n), make([]string, n), make([]time.Time, n)
		for i, a := range w.allocs {
			ids[i], by[i], due[i] = a.orderID, a.filledBy, a.due
		}
		w.b.Queue(`UPDATE orders o SET filled_by = u.by, status = 'allocating', next_due_at = u.due, updated_at = now()
			FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS u(id, by, due) WHERE o.id = u.id`, ids, by, due)
		w.allocs = nil
	}
	if n := len(w.signed); n > 0 {
		txids, ids, purposes, seqs, attempts, signers, bodies, exps := make([]string, n), make([]string, n), make([]string, n),
			make([]int32, n), make([]int32, n), make([]string, n), make([]string, n), make([]time.Time, n)
		for i, r := range w.signed {
			txids[i], ids[i], purposes[i], seqs[i], attempts[i] = r.s.Tx.TxID, r.s.OrderID, r.s.Purpose, int32(r.s.FillSeq), int32(r.s.Attempt)
			signers[i], bodies[i], exps[i] = r.s.Signer, r.body, r.s.Expiration
		}
		w.b.Queue(`INSERT INTO signed_txs (txid, order_id, purpose, fill_seq, attempt, signer, tx, expiration, state)
			SELECT t, o, p, s, a, g, b::jsonb, e, 'signed'
			FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[], $7::text[], $8::timestamptz[]) AS u(t, o, p, s, a, g, b, e)`,
			txids, ids, purposes, seqs, attempts, signers, bodies, exps)
		w.signed = nil
	}
}

// With lets another store queue its statements in the same round trip (chainstore.QueueTrack).
func (w *Writes) With(queue func(b *pgx.Batch)) {
	w.flush()
	queue(&w.b)
}

// Len is the number of statements queued.
func (w *Writes) Len() int {
	w.flush()
	return w.b.Len()
}

// Send runs the queued statements in tx, in one round trip, and empties w.
func (w *Writes) Send(ctx context.Context, tx pgx.Tx) error {
	w.flush()
	err := tx.SendBatch(ctx, &w.b).Close()
	w.b = pgx.Batch{}
	return err
}

// Due is an order ClaimDue took, with its status at the claim.
type Due struct {
	ID     string
	Status orders.Status
}

// ClaimDue takes up to n orders whose next_due_at is at or before now, skipping those
// another replica holds, and makes them due again at lease: a claim by a replica that dies
// is taken up by another once the lease ran out.
func ClaimDue(ctx context.Context, db DB, now, lease time.Time, n int) ([]Due, error) {
	rows, err := db.Query(ctx, `UPDATE orders SET next_due_at = $2 WHERE id IN (
			SELECT id FROM orders WHERE next_due_at <= $1 ORDER BY next_due_at LIMIT $3 FOR UPDATE SKIP LOCKED)
		RETURNING id, status`, now, lease, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Due, error) {
		var d Due
		var status string
		err := r.Scan(&d.ID, &status)
		d.Status = orders.Status(status)
		return d, err
	})
}

// DueAgain makes an order that has not ended due at at, outside any step (a step failed).
func DueAgain(ctx context.Context, db DB, orderID string, at time.Time) error {
	_, err := db.Exec(ctx, `UPDATE orders SET next_due_at = $2 WHERE id = $1 AND status NOT IN ('expired', 'reclaimed', 'failed', 'refunded')`,
		orderID, at)
	return err
}

// SetDue sets the order's next look.
func SetDue(ctx context.Context, tx pgx.Tx, orderID string, at time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE orders SET next_due_at = $2 WHERE id = $1`, orderID, at)
	return err
}

// ClearDue clears the order's timer: nothing is to be done for it.
func ClearDue(ctx context.Context, tx pgx.Tx, orderID string) error {
	_, err := tx.Exec(ctx, `UPDATE orders SET next_due_at = NULL WHERE id = $1`, orderID)
	return err
}

// Transition changes the order's status and its timer (nil: none).
func Transition(ctx context.Context, tx pgx.Tx, orderID string, to orders.Status, due *time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE orders SET status = $2, next_due_at = $3, updated_at = now() WHERE id = $1`, orderID, string(to), due)
	return err
}

// Allocated queues the order's move to allocating, filled by filledBy, due at due.
func (w *Writes) Allocated(orderID, filledBy string, due time.Time) {
	w.allocs = append(w.allocs, allocRow{orderID, filledBy, due})
}

const filledBySQL = `UPDATE orders SET filled_by = $2 WHERE id = $1 AND (filled_by IS NULL OR filled_by = $3)`

// SetFilledBy names who delivers (a part of) the order, in place of the own pools: a
// provider's slug or orders.FilledByDeep. A name other than the pools' is kept.
func SetFilledBy(ctx context.Context, tx pgx.Tx, orderID, by string) error {
	_, err := tx.Exec(ctx, filledBySQL, orderID, by, orders.FilledByPool)
	return err
}

// FilledBy queues SetFilledBy.
func (w *Writes) FilledBy(orderID, by string) {
	w.queue(filledBySQL, orderID, by, orders.FilledByPool)
}

// SetActivated records the receiver's activation, made by the transaction hash.
func SetActivated(ctx context.Context, tx pgx.Tx, orderID, hash string) error {
	_, err := tx.Exec(ctx, `UPDATE orders SET activation_performed = true, activation_hash = $2, updated_at = now() WHERE id = $1`,
		orderID, hash)
	return err
}

// MarkDelegated moves the order to delegated with its delegations' hashes (fill order),
// due at due.
func MarkDelegated(ctx context.Context, tx pgx.Tx, orderID string, hashes []string, due time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE orders SET delegate_hashes = $2, status = $3, next_due_at = $4, updated_at = now() WHERE id = $1`,
		orderID, hashes, string(orders.Delegated), due)
	return err
}

// Delivery is what confirmation records.
type Delivery struct {
	Delivered   int64
	Partial     bool
	RefundSun   int64      // added to refunded_amount_sun (the pro-rata refund)
	DelegatedAt time.Time  // the block of the first delegation that landed
	ExpiresAt   *time.Time // nil: never (an activation)
}

// Confirm records the delivery and makes the order active (confirmed is passed through,
// never stored), due at its expiry; it returns the order as it is after it, in the same
// round trip.
func Confirm(ctx context.Context, tx pgx.Tx, orderID string, d Delivery) (Row, error) {
	var w Writes
	rows := w.ConfirmMany([]string{orderID}, []Delivery{d})
	if err := w.Send(ctx, tx); err != nil {
		return Row{}, err
	}
	if len(*rows) == 0 {
		return Row{}, ErrNotFound
	}
	return (*rows)[0], nil
}

// ConfirmMany queues the confirmation of several orders locked in the transaction (ids[i]
// with ds[i]; what Confirm records, Confirm being this for one order) as one statement;
// the orders as they are after it fill the returned slice, in id order, once Send returned.
func (w *Writes) ConfirmMany(ids []string, ds []Delivery) *[]Row {
	n := len(ids)
	delivered, partial, refund := make([]int64, n), make([]bool, n), make([]int64, n)
	at, expires := make([]time.Time, n), make([]*time.Time, n)
	for i, d := range ds {
		delivered[i], partial[i], refund[i], at[i], expires[i] = d.Delivered, d.Partial, d.RefundSun, d.DelegatedAt, d.ExpiresAt
	}
	out := &[]Row{}
	// The energy delivered per day (energy_delivered_days, migration 00027) moves with the
	// orders in the same statement: each order's delivery is added to its day, and what an
	// order confirmed before counted (was_at, was_delivered: the row before this update,
	// through the self-join) is taken back from its own, so a repeated confirmation
	// counts once. A connection adds to one shard of the day's rows.
	w.queue(`WITH c AS (
			UPDATE orders o SET status = 'active', delivered_amount = u.delivered, partial = u.partial,
				refunded_amount_sun = o.refunded_amount_sun + u.refund, delegated_at = u.at, expires_at = u.expires,
				next_due_at = u.expires, updated_at = now()
			FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::bigint[], $5::timestamptz[], $6::timestamptz[])
				AS u(id, delivered, partial, refund, at, expires), orders p
			WHERE o.id = u.id AND p.id = u.id
			RETURNING o.*, p.delegated_at AS was_at, p.delivered_amount AS was_delivered
		), days AS (
			INSERT INTO energy_delivered_days AS t (network, day, shard, energy)
			SELECT network, day, pg_backend_pid() % 16, sum(n) FROM (
				SELECT network, (delegated_at AT TIME ZONE 'UTC')::date AS day, coalesce(delivered_amount, 0) AS n
				FROM c WHERE resource = 'energy' AND delegated_at IS NOT NULL
				UNION ALL
				SELECT network, (was_at AT TIME ZONE 'UTC')::date, -coalesce(was_delivered, 0)
				FROM c WHERE resource = 'energy' AND was_at IS NOT NULL
			) AS d GROUP BY network, day ORDER BY network, day
			ON CONFLICT (network, day, shard) DO UPDATE SET energy = t.energy + excluded.energy
		)
		SELECT `+columns+` FROM c ORDER BY id`, ids, delivered, partial, refund, at, expires).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			r, err := scan(rows)
			if err != nil {
				return err
			}
			*out = append(*out, r)
		}
		return rows.Err()
	})
	return out
}

// End ends a rental: status expired or reclaimed, with the undelegation's hash (nil when
// nothing of ours was delegated), at at.
func End(ctx context.Context, tx pgx.Tx, orderID string, to orders.Status, reclaimHash *string, at time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE orders SET status = $2, reclaim_hash = $3, ended_at = $4, next_due_at = NULL, updated_at = now() WHERE id = $1`,
		orderID, string(to), reclaimHash, at)
	return err
}

// Fail ends an undelivered order: status failed with the failure, its whole charge counted
// refunded (the caller reverses it in the ledger in tx), and its fills still on their way
// failed.
func Fail(ctx context.Context, tx pgx.Tx, orderID string, f orders.Failure, at time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE orders SET status = 'failed', failure = $2, refunded_amount_sun = charged_amount_sun,
			ended_at = $3, next_due_at = NULL, updated_at = now() WHERE id = $1`,
		orderID, f, at); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE order_fills SET state = 'failed', updated_at = now() WHERE order_id = $1 AND state IN ('reserved', 'broadcast')`, orderID)
	return err
}

// MarkRefunded records a support refund of a delivered order: status refunded with the
// reason, the whole charge counted refunded (the caller refunds the rest in the ledger in
// tx), ended at at unless it had ended, and due at at (a delegation still on chain is
// taken back).
func MarkRefunded(ctx context.Context, tx pgx.Tx, orderID, reason string, at time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE orders SET status = 'refunded', refunded_amount_sun = charged_amount_sun, refund_reason = $2,
				ended_at = coalesce(ended_at, $3), next_due_at = $3, updated_at = now() WHERE id = $1`, orderID, reason, at)
	return err
}
