package orderflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/chainwatch"
	"rental/infra/orderstore"
	"rental/infra/tron"
)

// Purposes of journaled transactions.
const (
	purposeActivate   = "activate"
	purposeDelegate   = "delegate"
	purposeUndelegate = "undelegate"
)

// Journal states. signed: stored, maybe broadcast (a crash can lose the answer);
// broadcast: the node accepted it; landed / failed: its block's result, from chain facts;
// dropped: it can never land (refused by the node, or expired outside any block).
const (
	stateSigned    = "signed"
	stateBroadcast = "broadcast"
	stateLanded    = "landed"
	stateFailed    = "failed"
	stateDropped   = "dropped"
)

// journalRow is one signed transaction of an order.
type journalRow struct {
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

// settled reports whether the transaction's fate is known.
func (j journalRow) settled() bool {
	return j.State == stateLanded || j.State == stateFailed || j.State == stateDropped
}

// journal reads the order's signed transactions, latest attempt of each step last.
func journal(ctx context.Context, tx pgx.Tx, orderID string) ([]journalRow, error) {
	rows, err := tx.Query(ctx, journalSQL, orderID)
	if err != nil {
		return nil, err
	}
	return scanJournal(rows)
}

const journalSQL = `SELECT txid, purpose, fill_seq, attempt, tx, expiration, state, result, block_time
		FROM signed_txs WHERE order_id = $1 ORDER BY purpose, fill_seq, attempt`

func scanJournal(rows pgx.Rows) ([]journalRow, error) {
	defer rows.Close()
	var out []journalRow
	for rows.Next() {
		var j journalRow
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

// latest returns the newest attempt of a step, if any.
func latest(js []journalRow, purpose string, fillSeq int) (journalRow, bool) {
	var out journalRow
	found := false
	for _, j := range js {
		if j.Purpose == purpose && j.FillSeq == fillSeq && (!found || j.Attempt > out.Attempt) {
			out, found = j, true
		}
	}
	return out, found
}

// sign has the node build the transaction for intent, checks it against the intent,
// signs it with the owner's pool key, and journals it in tx together with the chain
// follower's tracking of its id. Nothing is broadcast here: the caller broadcasts after
// tx commits, so a transaction on the wire always has its journal row.
func (f *Flow) sign(ctx context.Context, tx pgx.Tx, o orderstore.Row, purpose string, fillSeq, attempt int,
	intent tron.Intent, build func(context.Context) (*tron.Transaction, error)) (journalRow, error) {
	key, ok := f.byAddr[intent.Contract.Owner()]
	if !ok {
		return journalRow{}, fmt.Errorf("no key for pool %s", intent.Contract.Owner())
	}
	built, err := build(ctx)
	if err != nil {
		return journalRow{}, fmt.Errorf("build %s: %w", purpose, err)
	}
	raw, err := tron.CheckBuilt(built, intent)
	if err != nil {
		return journalRow{}, fmt.Errorf("node-built %s transaction refused: %w", purpose, err)
	}
	if err := tron.SignTransaction(built, key); err != nil {
		return journalRow{}, err
	}
	body, err := json.Marshal(built)
	if err != nil {
		return journalRow{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO signed_txs (txid, order_id, purpose, fill_seq, attempt, signer, tx, expiration, state)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'signed')`,
		built.TxID, o.ID, purpose, fillSeq, attempt, key.Address().String(), body, time.UnixMilli(raw.Expiration)); err != nil {
		return journalRow{}, fmt.Errorf("journal %s: %w", purpose, err)
	}
	if err := chainwatch.Track(ctx, tx, built.TxID); err != nil {
		return journalRow{}, err
	}
	return journalRow{TxID: built.TxID, Purpose: purpose, FillSeq: fillSeq, Attempt: attempt, Tx: *built,
		Expiration: raw.Expiration, State: stateSigned}, nil
}

// broadcastAll broadcasts journaled transactions (after their rows committed) and records
// what the node said. A node that cannot be reached leaves them signed: the next step
// broadcasts the same bytes again.
func (f *Flow) broadcastAll(js []journalRow) action {
	return func(ctx context.Context) error {
		var errs []error
		for _, j := range js {
			state, result, err := f.broadcast(ctx, j)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, err := f.o.Pool.Exec(ctx, `UPDATE signed_txs SET state = $2, result = $3, updated_at = now()
				WHERE txid = $1 AND state = 'signed'`, j.TxID, state, result); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
}

// broadcast sends one journaled transaction. The node's refusals settle it (dropped, with
// the code); a duplicate means the network has it already, which is success.
func (f *Flow) broadcast(ctx context.Context, j journalRow) (state string, result *string, err error) {
	_, err = f.o.Node.BroadcastTransaction(ctx, &j.Tx)
	var ne *tron.NodeError
	switch {
	case err == nil:
		return stateBroadcast, nil, nil
	case errors.As(err, &ne) && ne.Code == "DUP_TRANSACTION_ERROR":
		return stateBroadcast, nil, nil
	case errors.As(err, &ne) && ne.Code != "" && ne.Code != "SERVER_BUSY" && ne.Code != "OTHER_ERROR":
		r := ne.Code + ": " + ne.Message
		f.log.Info("transaction refused by the node", "txid", j.TxID, "purpose", j.Purpose, "code", ne.Code, "message", ne.Message)
		return stateDropped, &r, nil
	}
	return "", nil, fmt.Errorf("broadcast %s: %w", j.TxID, err)
}
