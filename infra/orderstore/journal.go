package orderstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/tron"
)

// The signer journal (signed_txs): every transaction the processor makes is stored here,
// signed, before it is broadcast; a provider's delegation is recorded here too, so that
// settling treats it like ours (docs/order-processing.md "The signer journal").

// Purposes of journaled transactions.
const (
	PurposeActivate   = "activate"
	PurposeDelegate   = "delegate"
	PurposeUndelegate = "undelegate"
)

// Journal states. signed: stored, maybe broadcast (a crash can lose the answer);
// broadcast: the node accepted it; landed / failed: its block's result, from chain facts;
// dropped: it can never land (refused by the node, or expired outside any block).
const (
	JournalSigned    = "signed"
	JournalBroadcast = "broadcast"
	JournalLanded    = "landed"
	JournalFailed    = "failed"
	JournalDropped   = "dropped"
)

// JournalEntry is one signed transaction of an order.
type JournalEntry struct {
	TxID       string
	Purpose    string
	FillSeq    int
	Attempt    int
	Tx         tron.Transaction
	Expiration int64 // chain time, unix ms
	State      string
	Result     *string
	BlockTime  *time.Time
}

// Settled reports whether the transaction's fate is known.
func (j JournalEntry) Settled() bool {
	return j.State == JournalLanded || j.State == JournalFailed || j.State == JournalDropped
}

const journalSQL = `SELECT txid, purpose, fill_seq, attempt, tx, expiration, state, result, block_time
		FROM signed_txs WHERE order_id = $1 ORDER BY purpose, fill_seq, attempt`

// Journal reads the order's signed transactions, latest attempt of each step last.
func Journal(ctx context.Context, q Querier, orderID string) ([]JournalEntry, error) {
	rows, err := q.Query(ctx, journalSQL, orderID)
	if err != nil {
		return nil, err
	}
	return scanJournal(rows)
}

func scanJournal(rows pgx.Rows) ([]JournalEntry, error) {
	defer rows.Close()
	var out []JournalEntry
	for rows.Next() {
		var j JournalEntry
		var raw []byte
		var exp time.Time
		if err := rows.Scan(&j.TxID, &j.Purpose, &j.FillSeq, &j.Attempt, &raw, &exp, &j.State, &j.Result, &j.BlockTime); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &j.Tx); err != nil {
			return nil, fmt.Errorf("journal %s: %w", j.TxID, err)
		}
		j.Expiration = exp.UnixMilli()
		out = append(out, j)
	}
	return out, rows.Err()
}

// Signed is a transaction the processor signed for an order's step.
type Signed struct {
	OrderID string
	Purpose string
	FillSeq int
	Attempt int
	Signer  string
	Tx      *tron.Transaction
	// Expiration is the transaction's, on the chain's clock.
	Expiration time.Time
}

// InsertSigned journals a signed transaction, state signed, inside tx; the caller
// broadcasts it only after tx committed. A second transaction for the same step and
// attempt violates signed_txs_step.
func InsertSigned(ctx context.Context, tx pgx.Tx, s Signed) error {
	body, err := json.Marshal(s.Tx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, insertSignedSQL, s.Tx.TxID, s.OrderID, s.Purpose, s.FillSeq, s.Attempt, s.Signer, body, s.Expiration)
	return err
}

const insertSignedSQL = `INSERT INTO signed_txs (txid, order_id, purpose, fill_seq, attempt, signer, tx, expiration, state)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'signed')`

// Signed queues InsertSigned: the transaction is journaled when the writes are sent, and
// must not be broadcast before their transaction committed.
func (w *Writes) Signed(s Signed) error {
	body, err := json.Marshal(s.Tx)
	if err != nil {
		return err
	}
	w.signed = append(w.signed, signedRow{s, string(body)})
	return nil
}

// InsertProviderDelegation journals a provider's delegation for the order's fill as
// broadcast (the provider sent it), unless its txid is journaled already. body describes
// the purchase (the provider signed the transaction, we hold no bytes of it).
func InsertProviderDelegation(ctx context.Context, tx pgx.Tx, txID, orderID string, fillSeq int, signer string, body map[string]any,
	expiration time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO signed_txs (txid, order_id, purpose, fill_seq, attempt, signer, tx, expiration, state)
		VALUES ($1, $2, 'delegate', $3, 0, $4, $5, $6, 'broadcast') ON CONFLICT (txid) DO NOTHING`,
		txID, orderID, fillSeq, signer, body, expiration)
	return err
}

// SetSent records the node's answer to the broadcast of a signed transaction (state
// broadcast, or dropped with the refusal as result); a row no longer signed is left alone.
func SetSent(ctx context.Context, db DB, txID, state string, result *string) error {
	_, err := db.Exec(ctx, `UPDATE signed_txs SET state = $2, result = $3, updated_at = now()
				WHERE txid = $1 AND (state = 'signed') IS TRUE`, txID, state, result) // a key lookup's guard (pg/plans.go)
	return err
}

// DueBroadcastNow makes every order with a broadcast transaction not yet settled due at
// once, and returns how many. A starting processor calls it: what the node held in its
// pending pool when the processor (or the node with it) went down may be gone, and such an
// order's timer otherwise fires only LandGrace after the broadcast (orderflow's
// landedOrDropped sends the transaction again). Reads the journal's partial index of
// unsettled rows.
func DueBroadcastNow(ctx context.Context, db DB) (int64, error) {
	tag, err := db.Exec(ctx, `UPDATE orders SET next_due_at = now()
		WHERE id IN (SELECT order_id FROM signed_txs WHERE state = 'broadcast')
			AND (next_due_at IS NULL OR next_due_at > now())`)
	return tag.RowsAffected(), err
}

// SetAwaitingBlock puts a transaction recorded as dropped back to broadcast: the node
// knows it after all, and its block result is still to come.
func SetAwaitingBlock(ctx context.Context, tx pgx.Tx, txID string) error {
	_, err := tx.Exec(ctx, `UPDATE signed_txs SET state = 'broadcast', result = NULL, updated_at = now() WHERE txid = $1`, txID)
	return err
}

// SetExpiredOutsideBlock records a signed or broadcast transaction as dropped, with the
// result EXPIRED_OUTSIDE_BLOCK: its expiration passed on the chain's clock while it was in
// no block, so it can never land.
func SetExpiredOutsideBlock(ctx context.Context, tx pgx.Tx, txID string) error {
	_, err := tx.Exec(ctx, `UPDATE signed_txs SET state = 'dropped', result = 'EXPIRED_OUTSIDE_BLOCK', updated_at = now()
			WHERE txid = $1 AND (state IN ('signed', 'broadcast')) IS TRUE`, txID) // a key lookup's guard (pg/plans.go)
	return err
}

// SetBlockResult records a signed or broadcast transaction's block result as the node
// reports it (state landed or failed).
func SetBlockResult(ctx context.Context, tx pgx.Tx, txID, state, result string, blockNum int64, blockTime time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE signed_txs SET state = $2, result = $3, block_num = $4, block_time = $5, updated_at = now()
		WHERE txid = $1 AND (state IN ('signed', 'broadcast')) IS TRUE`, txID, state, result, blockNum, blockTime) // a key lookup's guard (pg/plans.go)
	return err
}

// ApplyBlockResult records a transaction's block result from its chain fact (state landed
// or failed), also over a row recorded dropped: the chain's word is the truth. It returns
// the transaction's order and the state it had, or pgx.ErrNoRows when the transaction is
// not journaled or its result was applied before.
func ApplyBlockResult(ctx context.Context, db DB, txID, state, result string, blockNum int64, blockTime time.Time) (orderID, was string, err error) {
	err = db.QueryRow(ctx, applyBlockResultSQL, txID, state, result, blockNum, blockTime).Scan(&orderID, &was)
	return orderID, was, err
}

const applyBlockResultSQL = `UPDATE signed_txs s SET state = $2, result = $3, block_num = $4, block_time = $5, updated_at = now()
			FROM (SELECT txid, state FROM signed_txs WHERE txid = $1 FOR UPDATE) old
			WHERE s.txid = old.txid AND old.state IN ('signed', 'broadcast', 'dropped') RETURNING s.order_id, old.state`

// RevertBlockResult puts a transaction whose block was orphaned back to waiting for a
// block, unless its order already moved past delivery (then the new branch's fact settles
// it again). It returns the transaction's order, or pgx.ErrNoRows when nothing changed.
func RevertBlockResult(ctx context.Context, db DB, txID string) (orderID string, err error) {
	err = db.QueryRow(ctx, `UPDATE signed_txs s SET state = 'broadcast', result = NULL, block_num = NULL, block_time = NULL, updated_at = now()
			FROM orders o WHERE s.txid = $1 AND s.order_id = o.id AND s.state IN ('landed', 'failed')
			AND (o.status IN ('allocating', 'delegated')) IS TRUE RETURNING s.order_id`, txID).Scan(&orderID) // a key lookup's guard (pg/plans.go)
	return orderID, err
}

// OrderOfTx is the order a journaled transaction belongs to, or pgx.ErrNoRows.
func OrderOfTx(ctx context.Context, q Querier, txID string) (string, error) {
	var orderID string
	err := q.QueryRow(ctx, `SELECT order_id FROM signed_txs WHERE txid = $1`, txID).Scan(&orderID)
	return orderID, err
}

// JournalBacklog is one state of the unsettled signer journal: how many transactions are
// in it and how long the oldest has been.
type JournalBacklog struct {
	Count  int64
	Oldest time.Duration
}

// UnsettledJournal counts the journal's entries whose fate is not known yet, by state
// (signed: stored, not known to be accepted by the node; broadcast: accepted, not yet in a
// block). Both states are always present in the result. The partial index
// signed_txs_unsettled makes this read only the entries in flight.
func UnsettledJournal(ctx context.Context, q Querier) (map[string]JournalBacklog, error) {
	rows, err := q.Query(ctx, `SELECT state, count(*), EXTRACT(EPOCH FROM now() - min(created_at))::float8
		FROM signed_txs WHERE state IN ('signed', 'broadcast') GROUP BY state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]JournalBacklog{JournalSigned: {}, JournalBroadcast: {}}
	for rows.Next() {
		var state string
		var b JournalBacklog
		var age float64
		if err := rows.Scan(&state, &b.Count, &age); err != nil {
			return nil, err
		}
		b.Oldest = time.Duration(max(age, 0) * float64(time.Second))
		out[state] = b
	}
	return out, rows.Err()
}
