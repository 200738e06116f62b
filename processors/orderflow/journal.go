package orderflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/chainstore"
	"rental/infra/orderstore"
	"rental/infra/tron"
)

// latest returns the newest attempt of a step, if any.
func latest(js []orderstore.JournalEntry, purpose string, fillSeq int) (orderstore.JournalEntry, bool) {
	var out orderstore.JournalEntry
	found := false
	for _, j := range js {
		if j.Purpose == purpose && j.FillSeq == fillSeq && (!found || j.Attempt > out.Attempt) {
			out, found = j, true
		}
	}
	return out, found
}

// sign has the node build the transaction for intent, checks it against the intent,
// signs it with the pool's signer key under its delegate permission (custody.go), and journals it in tx together with the chain
// follower's tracking of its id. Nothing is broadcast here: the caller broadcasts after
// tx commits, so a transaction on the wire always has its journal row.
func (f *Flow) sign(ctx context.Context, tx pgx.Tx, o orderstore.Row, purpose string, fillSeq, attempt int,
	intent tron.Intent, build func(context.Context) (*tron.Transaction, error)) (orderstore.JournalEntry, error) {
	s, j, err := f.signTx(ctx, o, purpose, fillSeq, attempt, intent, build)
	if err != nil {
		return j, err
	}
	if err := orderstore.InsertSigned(ctx, tx, s); err != nil {
		return orderstore.JournalEntry{}, fmt.Errorf("journal %s: %w", purpose, err)
	}
	if err := chainstore.Track(ctx, tx, s.Tx.TxID); err != nil {
		return orderstore.JournalEntry{}, err
	}
	return j, nil
}

// signTx is sign without the journal's writes: the signed transaction, for the caller to
// journal (orderstore.Writes.Signed with chainstore.QueueTrack) before it broadcasts, and
// its journal entry as it will read back.
func (f *Flow) signTx(ctx context.Context, o orderstore.Row, purpose string, fillSeq, attempt int,
	intent tron.Intent, build func(context.Context) (*tron.Transaction, error)) (orderstore.Signed, orderstore.JournalEntry, error) {
	key, permissionID, err := f.signerFor(intent.Contract.Owner())
	if err != nil {
		return orderstore.Signed{}, orderstore.JournalEntry{}, err
	}
	built, err := build(ctx)
	if err != nil {
		return orderstore.Signed{}, orderstore.JournalEntry{}, fmt.Errorf("build %s: %w", purpose, err)
	}
	raw, err := tron.CheckBuilt(built, intent)
	if err != nil {
		return orderstore.Signed{}, orderstore.JournalEntry{}, fmt.Errorf("node-built %s transaction refused: %w", purpose, err)
	}
	// Unique before signing: two fills from one pool to one receiver with the same amount
	// and lock, built within one millisecond (or by a node stamping the head block's time),
	// are byte-identical, and the journal's primary key would hold the second back a block.
	raw.Timestamp = uniqueStamp(raw.Timestamp)
	// The node builds with Permission_id 0; the signer signs under the pool's permission.
	raw.PermissionID = permissionID
	if built, err = tron.NewSignedTransaction(raw, built.Visible, key); err != nil {
		return orderstore.Signed{}, orderstore.JournalEntry{}, err
	}
	s := orderstore.Signed{OrderID: o.ID, Purpose: purpose, FillSeq: fillSeq, Attempt: attempt,
		Signer: key.Address().String(), Tx: built, Expiration: time.UnixMilli(raw.Expiration)}
	return s, orderstore.JournalEntry{TxID: built.TxID, Purpose: purpose, FillSeq: fillSeq, Attempt: attempt, Tx: *built,
		Expiration: raw.Expiration, State: orderstore.JournalSigned}, nil
}

// broadcastAll broadcasts journaled transactions (after their rows committed) and records
// what the node said. A node that cannot be reached leaves them signed: the next step
// broadcasts the same bytes again.
func (f *Flow) broadcastAll(js []orderstore.JournalEntry) action {
	return func(ctx context.Context) (bool, error) {
		var errs []error
		for _, j := range js {
			state, result, err := f.broadcast(ctx, j)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if err := orderstore.SetSent(ctx, f.o.Pool, j.TxID, state, result); err != nil {
				errs = append(errs, err)
			}
		}
		return true, errors.Join(errs...)
	}
}

// broadcastAndMark broadcasts an order's journaled delegations like broadcastAll, and hands
// the node's answers to the group broadcast mark (mark.go), which records them and moves
// the order to delegated when they complete its delivery: then no further step is needed
// now. Otherwise the order's next step goes on from the recorded answers.
func (f *Flow) broadcastAndMark(orderID string, js []orderstore.JournalEntry) action {
	return func(ctx context.Context) (bool, error) {
		var errs []error
		var sent []orderstore.Sent
		for _, j := range js {
			state, result, err := f.broadcast(ctx, j)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			sent = append(sent, orderstore.Sent{TxID: j.TxID, State: state, Result: result})
		}
		if len(sent) > 0 {
			marked, err := f.markSent(ctx, orderID, sent)
			if err != nil {
				errs = append(errs, err)
			} else if marked && len(errs) == 0 {
				return false, nil
			}
		}
		return true, errors.Join(errs...)
	}
}

// broadcast sends one journaled transaction, as tron.ClassifyBroadcast sorts the answer:
// accepted (including DUP_TRANSACTION_ERROR, and "P2P broadcast failed." which comes after
// the node pushed it, so it may still land) is broadcast; a refusal settles it (dropped,
// with the code); anything else (NO_CONNECTION, NOT_ENOUGH_EFFECTIVE_CONNECTION before the
// push, BLOCK_UNSOLIDIFIED, SERVER_BUSY, OTHER_ERROR, no answer) leaves it signed and the
// next step sends the same bytes again, until the node refuses them as expired.
func (f *Flow) broadcast(ctx context.Context, j orderstore.JournalEntry) (state string, result *string, err error) {
	_, err = f.o.Node.BroadcastTransaction(ctx, &j.Tx)
	var ne *tron.NodeError
	switch tron.ClassifyBroadcast(err) {
	case tron.BroadcastAccepted:
		if err != nil {
			f.log.Info("broadcast answered with an error after the node took the transaction", "txid", j.TxID, "err", err)
		}
		return orderstore.JournalBroadcast, nil, nil
	case tron.BroadcastRefused:
		errors.As(err, &ne)
		r := ne.Code + ": " + ne.Message
		f.log.Info("transaction refused by the node", "txid", j.TxID, "purpose", j.Purpose, "code", ne.Code, "message", ne.Message)
		return orderstore.JournalDropped, &r, nil
	}
	return "", nil, fmt.Errorf("broadcast %s: %w", j.TxID, err)
}

// resignable reports whether a journaled transaction the node refused as expired (or with a
// reference block it no longer knows) may be replaced by a new one. java-tron checks TaPoS
// and expiration before it looks for duplicates, so such a refusal says nothing about
// whether an earlier broadcast of the same bytes landed: confirmGone asks the node before
// anything is signed again. A transaction the network never took (a crash or a stall
// between signing and broadcasting outlived its minute) is retried rather than failed.
func resignable(j orderstore.JournalEntry) bool {
	if j.State != orderstore.JournalDropped || j.Result == nil {
		return false
	}
	r := *j.Result
	return strings.HasPrefix(r, "TRANSACTION_EXPIRATION_ERROR") || strings.HasPrefix(r, "TAPOS_ERROR")
}

// confirmGone checks with the node that a transaction refused as expired is in no block
// and not waiting for one. If the node has it after all (an earlier broadcast whose answer
// was lost), the journal row goes back to broadcast and the chain settles it; only a
// transaction the node does not know stays dropped and may be signed again.
func (f *Flow) confirmGone(ctx context.Context, tx pgx.Tx, j orderstore.JournalEntry) (orderstore.JournalEntry, error) {
	_, err := f.o.Node.GetTransactionInfoByID(ctx, j.TxID)
	if errors.Is(err, tron.ErrNotFound) {
		_, err = f.o.Node.GetTransactionByID(ctx, j.TxID)
		if errors.Is(err, tron.ErrNotFound) {
			return j, nil // gone for good
		}
	}
	if err != nil {
		return j, err
	}
	f.log.Warn("a transaction refused as expired is known to the node; waiting for its block", "txid", j.TxID, "purpose", j.Purpose)
	if err := orderstore.SetAwaitingBlock(ctx, tx, j.TxID); err != nil {
		return j, err
	}
	j.State, j.Result = orderstore.JournalBroadcast, nil
	return j, nil
}

// headTime is the chain's clock: the newest block's timestamp, unix ms.
func (f *Flow) headTime(ctx context.Context) (int64, error) {
	b, err := f.o.Node.GetHead(ctx)
	if err != nil {
		return 0, err
	}
	return b.BlockHeader.RawData.Timestamp, nil
}

// lastStamp is the last transaction timestamp uniqueStamp gave out (ms since the epoch).
var lastStamp atomic.Int64

// uniqueStamp returns ts, or the smallest stamp above every one given out before by this
// process: the timestamp is part of the signed bytes, so distinct stamps make distinct
// transaction ids.
func uniqueStamp(ts int64) int64 {
	for {
		last := lastStamp.Load()
		next := max(ts, last+1)
		if lastStamp.CompareAndSwap(last, next) {
			return next
		}
	}
}
