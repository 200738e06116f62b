package orderstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/pg"
	"rental/schemas/orders"
)

// Broadcast marks in groups (docs/order-processing.md "Broadcast marks in groups"): the
// node's answers to the broadcasts of several orders' delegations and the move of those
// orders to delegated, in one transaction of two round trips, instead of one statement per
// answer and one step transaction per order.

// Sent is the node's answer to the broadcast of a journaled transaction: state
// JournalBroadcast, or JournalDropped with the refusal as Result.
type Sent struct {
	TxID   string
	State  string
	Result *string
}

// JournalState is a delegation's journal row without its bytes, as BeginMarks reads it.
type JournalState struct {
	TxID    string
	FillSeq int
	Attempt int
	State   string
}

// MarkState is what BeginMarks read of one order it locked: its fills and its delegations'
// journal rows, with the answers of this batch applied.
type MarkState struct {
	Fills   []Fill
	Journal []JournalState
}

// Marks is what BeginMarks locked and read; the answer is there once BeginMarks returned.
type Marks struct {
	// Locked are the orders locked (still allocating, their activation done or not asked,
	// not activation orders), by id.
	Locked map[string]*MarkState
}

// BeginMarks begins a transaction on conn that records every answer of sent (as SetSent:
// a row no longer signed is left alone), locks those of orderIDs still allocating whose
// delivery is a delegation (an activation asked is performed), skipping any another
// transaction holds (a step of that order runs; it marks the order itself), and reads their
// fills and delegation journal rows: BEGIN and all of it in one round trip. End it with
// Writes.SendCommit (MarkDelegatedMany) or Rollback.
func BeginMarks(ctx context.Context, conn *pgx.Conn, sent []Sent, orderIDs []string) (pgx.Tx, *Marks, error) {
	out := &Marks{Locked: map[string]*MarkState{}}
	b := &pgx.Batch{}
	// By id alone (byIDOnly); rows it locks that are not to mark stay locked until the
	// group's transaction ends and are left alone.
	b.Queue(`SELECT id, status, resource, activation_amount_sun, activation_performed FROM orders
			WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED`, orderIDs).
		Query(func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				var id, status, resource string
				var activation int64
				var performed bool
				if err := rows.Scan(&id, &status, &resource, &activation, &performed); err != nil {
					return err
				}
				if toDelegate(orders.Status(status), orders.Resource(resource), activation, performed) {
					out.Locked[id] = &MarkState{}
				}
			}
			return rows.Err()
		})
	txids, states, results := make([]string, len(sent)), make([]string, len(sent)), make([]*string, len(sent))
	for i, s := range sent {
		txids[i], states[i], results[i] = s.TxID, s.State, s.Result
	}
	b.Queue(markAnswersSQL, txids, states, results)
	// The reads see the answers above (a statement sees what the transaction wrote before
	// it); only the locked orders' rows are used.
	b.Queue(`SELECT order_id, seq, source, pool_address, amount, balance_sun, state FROM order_fills
		WHERE order_id = ANY($1) ORDER BY order_id, seq`, orderIDs).Query(eachOrderFill(func(id string, fl Fill) {
		if m := out.Locked[id]; m != nil {
			m.Fills = append(m.Fills, fl)
		}
	}))
	b.Queue(`SELECT order_id, txid, fill_seq, attempt, state FROM signed_txs
		WHERE order_id = ANY($1) AND purpose = 'delegate' ORDER BY order_id, fill_seq, attempt`, orderIDs).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id string
			var j JournalState
			if err := rows.Scan(&id, &j.TxID, &j.FillSeq, &j.Attempt, &j.State); err != nil {
				return err
			}
			if m := out.Locked[id]; m != nil {
				m.Journal = append(m.Journal, j)
			}
		}
		return rows.Err()
	})
	tx, err := begin(ctx, conn, b)
	if err != nil {
		return nil, nil, err
	}
	return tx, out, nil
}

// FillTx is a fill whose delegation TxID was sent.
type FillTx struct {
	OrderID string
	Seq     int
	TxID    string
}

// markAnswersSQL records the node's answers to broadcasts, each transaction found by its
// key, the state a guard (pg/plans.go).
const markAnswersSQL = `UPDATE signed_txs s SET state = u.state, result = u.result, updated_at = now()
		FROM unnest($1::text[], $2::text[], $3::text[]) AS u(txid, state, result)
		WHERE s.txid = u.txid AND (s.state = 'signed') IS TRUE`

// markDelegatedManySQL reads each order's fills by its key and keeps the broadcast ones
// in the aggregate (pg/plans.go).
const markDelegatedManySQL = `UPDATE orders o SET delegate_hashes = (SELECT coalesce(array_agg(f.delegate_txid ORDER BY f.seq)
				FILTER (WHERE f.state = 'broadcast'), '{}') FROM order_fills f WHERE f.order_id = o.id),
			status = $2, next_due_at = $3, updated_at = now()
		WHERE o.id = ANY($1)`

// MarkDelegatedMany queues, for orders whose every delegation was sent, what
// FillBroadcast and MarkDelegated write for one: the fills broadcast with their
// delegations, then each order delegated with the hashes of its broadcast fills (fill
// order), due at due. The orders must be locked in the transaction (BeginMarks).
func (w *Writes) MarkDelegatedMany(fills []FillTx, orderIDs []string, due time.Time) {
	ids, seqs, txids := make([]string, len(fills)), make([]int32, len(fills)), make([]string, len(fills))
	for i, f := range fills {
		ids[i], seqs[i], txids[i] = f.OrderID, int32(f.Seq), f.TxID
	}
	w.queue(`UPDATE order_fills f SET state = 'broadcast', delegate_txid = u.txid, updated_at = now()
		FROM unnest($1::text[], $2::integer[], $3::text[]) AS u(order_id, seq, txid)
		WHERE f.order_id = u.order_id AND f.seq = u.seq`, ids, seqs, txids)
	w.queue(markDelegatedManySQL, orderIDs, string(orders.Delegated), due)
}

// Deliveries is what BeginDeliveries locked and read.
type Deliveries struct {
	// Rows are the orders locked, in id order.
	Rows []Row
	// Fills are their fills (sequence order), by order id.
	Fills map[string][]Fill
	// Journaled are those of them with a delegation journaled already.
	Journaled map[string]bool
}

// BeginDeliveries begins a transaction on conn that locks those of orderIDs allocated and
// waiting for their delegations (allocating, not activation orders, an activation asked
// performed), skipping any another transaction holds (a step of that order runs), and
// reads, once they are locked, their fills and which of them journaled a delegation
// already: BEGIN and all of it in one round trip. End it with Writes.SendCommit or
// Rollback.
func BeginDeliveries(ctx context.Context, conn *pgx.Conn, orderIDs []string) (pgx.Tx, *Deliveries, error) {
	b := &pgx.Batch{}
	out := queueDeliveries(b, orderIDs, true)
	tx, err := begin(ctx, conn, b)
	if err != nil {
		return nil, nil, err
	}
	return tx, out, nil
}

// DeliveryCandidates reads what BeginDeliveries would, without locks or a transaction (one
// round trip): the caller prepares the delegations from it, then locks with
// BeginDeliveries and keeps an order only when what it read there is the same.
func DeliveryCandidates(ctx context.Context, db interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}, orderIDs []string) (*Deliveries, error) {
	b := &pgx.Batch{}
	b.Queue(pg.IndexPlans)
	out := queueDeliveries(b, orderIDs, false)
	return out, db.SendBatch(ctx, b).Close()
}

func queueDeliveries(b *pgx.Batch, orderIDs []string, lock bool) *Deliveries {
	out := &Deliveries{Fills: map[string][]Fill{}, Journaled: map[string]bool{}}
	sql := `SELECT ` + columns + ` FROM orders WHERE id = ANY($1) ORDER BY id` // byIDOnly
	if lock {
		sql += ` FOR UPDATE SKIP LOCKED`
	}
	b.Queue(sql, orderIDs).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			r, err := scan(rows)
			if err != nil {
				return err
			}
			if toDelegate(r.Status, r.Resource, r.ActivationAmountSun, r.Activation.Performed) {
				out.Rows = append(out.Rows, r)
			}
		}
		return rows.Err()
	})
	b.Queue(`SELECT order_id, seq, source, pool_address, amount, balance_sun, state FROM order_fills
		WHERE order_id = ANY($1) ORDER BY order_id, seq`, orderIDs).Query(eachOrderFill(func(id string, fl Fill) {
		out.Fills[id] = append(out.Fills[id], fl)
	}))
	b.Queue(`SELECT DISTINCT order_id FROM signed_txs WHERE order_id = ANY($1) AND purpose = 'delegate'`, orderIDs).
		Query(func(rows pgx.Rows) error {
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			for _, id := range ids {
				out.Journaled[id] = true
			}
			return err
		})
	return out
}

// Fact is a chain fact's block result for a journaled transaction (ApplyBlockResult's
// arguments).
type Fact struct {
	TxID      string
	State     string // JournalLanded or JournalFailed
	Result    string
	BlockNum  int64
	BlockTime time.Time
}

// FactsLocked is what BeginFacts locked and read.
type FactsLocked struct {
	// Orders are the orders locked, each as BeginLocked reads one (journal and fills with
	// the facts applied), in id order.
	Orders []Locked
	// OrderOf is each fact's order, of the facts whose transaction is journaled.
	OrderOf map[string]string
	// WasDropped are the transactions recorded dropped whose fact said they landed after all.
	WasDropped []string
}

// BeginFacts begins a transaction on conn that locks the orders of several chain facts'
// transactions, skipping any another transaction holds (its step applies the fact), applies
// every fact's block result (as ApplyBlockResult: a result applied before is left alone) and
// reads the locked orders' journals and fills, with the results applied: BEGIN and all of it
// in one round trip. End it with Commit or Rollback.
func BeginFacts(ctx context.Context, conn *pgx.Conn, facts []Fact) (pgx.Tx, *FactsLocked, error) {
	out := &FactsLocked{OrderOf: map[string]string{}}
	n := len(facts)
	txids, states, results, nums, times := make([]string, n), make([]string, n), make([]string, n), make([]int64, n), make([]time.Time, n)
	for i, f := range facts {
		txids[i], states[i], results[i], nums[i], times[i] = f.TxID, f.State, f.Result, f.BlockNum, f.BlockTime
	}
	byID := map[string]*Locked{}
	b := &pgx.Batch{}
	b.Queue(`SELECT `+columns+` FROM orders WHERE id IN (SELECT order_id FROM signed_txs WHERE txid = ANY($1))
			ORDER BY id FOR UPDATE SKIP LOCKED`, txids).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			r, err := scan(rows)
			if err != nil {
				return err
			}
			out.Orders = append(out.Orders, Locked{Row: r})
		}
		for i := range out.Orders {
			byID[out.Orders[i].Row.ID] = &out.Orders[i]
		}
		return rows.Err()
	})
	b.Queue(`UPDATE signed_txs s SET state = u.state, result = u.result, block_num = u.block_num, block_time = u.block_time, updated_at = now()
			FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[]) AS u(txid, state, result, block_num, block_time),
				(SELECT txid, state FROM signed_txs WHERE txid = ANY($1) ORDER BY txid FOR UPDATE) old
			WHERE s.txid = u.txid AND old.txid = u.txid AND old.state IN ('signed', 'broadcast', 'dropped')
			RETURNING s.txid, old.state`, txids, states, results, nums, times).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var txid, was string
			if err := rows.Scan(&txid, &was); err != nil {
				return err
			}
			if was == JournalDropped {
				out.WasDropped = append(out.WasDropped, txid)
			}
		}
		return rows.Err()
	})
	b.Queue(`SELECT txid, order_id FROM signed_txs WHERE txid = ANY($1)`, txids).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var txid, id string
			if err := rows.Scan(&txid, &id); err != nil {
				return err
			}
			out.OrderOf[txid] = id
		}
		return rows.Err()
	})
	b.Queue(`SELECT order_id, txid, purpose, fill_seq, attempt, tx, expiration, state, result, block_time FROM signed_txs
		WHERE order_id IN (SELECT order_id FROM signed_txs WHERE txid = ANY($1)) ORDER BY order_id, purpose, fill_seq, attempt`, txids).
		Query(func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				var id string
				var j JournalEntry
				var raw []byte
				var exp time.Time
				if err := rows.Scan(&id, &j.TxID, &j.Purpose, &j.FillSeq, &j.Attempt, &raw, &exp, &j.State, &j.Result, &j.BlockTime); err != nil {
					return err
				}
				if l := byID[id]; l != nil {
					if err := json.Unmarshal(raw, &j.Tx); err != nil {
						return fmt.Errorf("journal %s: %w", j.TxID, err)
					}
					j.Expiration = exp.UnixMilli()
					l.Journal = append(l.Journal, j)
				}
			}
			return rows.Err()
		})
	b.Queue(`SELECT order_id, seq, source, pool_address, amount, balance_sun, state FROM order_fills
		WHERE order_id IN (SELECT order_id FROM signed_txs WHERE txid = ANY($1)) ORDER BY order_id, seq`, txids).Query(eachOrderFill(func(id string, fl Fill) {
		if l := byID[id]; l != nil {
			l.Fills = append(l.Fills, fl)
		}
	}))
	tx, err := begin(ctx, conn, b)
	if err != nil {
		return nil, nil, err
	}
	return tx, out, nil
}

// FillStates queues the move of several orders' fills to a state each (SetFillState for
// many: orderIDs[i]'s fill seqs[i] to states[i]).
func (w *Writes) FillStates(orderIDs []string, seqs []int, states []string) {
	s32 := make([]int32, len(seqs))
	for i, s := range seqs {
		s32[i] = int32(s)
	}
	w.queue(`UPDATE order_fills f SET state = u.state, updated_at = now()
		FROM unnest($1::text[], $2::integer[], $3::text[]) AS u(order_id, seq, state)
		WHERE f.order_id = u.order_id AND f.seq = u.seq`, orderIDs, s32, states)
}
