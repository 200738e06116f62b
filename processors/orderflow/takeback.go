package orderflow

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/orders"
)

// blockInterval is TRON's block time.
const blockInterval = 3 * time.Second

// takeBack ends an active rental at expires_at, or early when the customer reclaimed it:
// one undelegation per landed fill, journaled like the delegations. The order ends (and its
// event leaves, with the undelegation as reclaim_hash) only once every undelegation is in a
// block: one that fails, is refused or expires outside a block is signed again. Under
// LockNone the undelegation is accepted at once; the chain refuses one while a lock runs
// (LockTier), and the step is then due when the lock ends.
func (f *Flow) takeBack(ctx context.Context, tx pgx.Tx, o orderstore.Row, pre *loaded) (bool, action, error) {
	now := f.o.Now()
	reclaim := o.ReclaimRequestedAt != nil
	if o.Resource == orders.Activation || o.ExpiresAt == nil {
		// An activation has no rental to end.
		if o.NextDueAt != nil {
			return false, nil, orderstore.ClearDue(ctx, tx, o.ID)
		}
		return false, nil, nil
	}
	expires := time.Time(*o.ExpiresAt)
	if !reclaim && now.Before(expires) {
		return f.wait(ctx, tx, o, expires)
	}
	hashes, next, after, err := f.returnStake(ctx, tx, o, pre)
	if err != nil || next != nil {
		return false, after, err
	}
	to, typ := orders.Expired, orders.EventExpired
	if reclaim {
		to, typ = orders.Reclaimed, orders.EventReclaimed
	}
	var hash *string
	if len(hashes) > 0 {
		hash = &hashes[0]
	}
	at := now.UTC().Truncate(time.Millisecond)
	if err := orderstore.End(ctx, tx, o.ID, to, hash, at); err != nil {
		return false, nil, err
	}
	f.transitions.WithLabelValues(string(to)).Inc()
	o.Status = to
	return false, nil, f.emit(ctx, tx, o, typ, o.Record.Ended(reclaim, hash, at))
}

// returnStake undelegates every landed fill of our own pools, journaled like the
// delegations, and reports the undelegation hashes once every one of them is in a block
// (the fills are then marked returned). Until then next is when to look again (already set
// as the order's due time) and after broadcasts what was just signed. An undelegation that
// fails, is refused or expires outside a block is signed again; the chain refuses one while
// the delegation's lock runs, and the step tries again a little later.
func (f *Flow) returnStake(ctx context.Context, tx pgx.Tx, o orderstore.Row, pre *loaded) (hashes []string, next *time.Time, after action, err error) {
	now := f.o.Now()
	due5 := now.Add(5 * f.o.RetryEvery)
	js, err := pre.journalOf(ctx, tx, o.ID)
	if err != nil {
		return nil, nil, nil, err
	}
	fs, err := pre.fillsOf(ctx, tx, o.ID)
	if err != nil {
		return nil, nil, nil, err
	}
	receiver, _ := tron.ParseAddress(o.Receiver)
	var pending []orderstore.JournalEntry
	done := true
	own := 0
	for _, fl := range fs {
		if fl.Source != orderstore.SourcePool || (fl.State != orderstore.FillLanded && fl.State != orderstore.FillReturned) {
			continue // a provider or the deep reserve takes its own delegation back
		}
		own++
		j, ok := latest(js, orderstore.PurposeUndelegate, fl.Seq)
		if ok && resignable(j) {
			if j, err = f.confirmGone(ctx, tx, j); err != nil {
				return nil, nil, nil, err
			}
		}
		if !ok || j.State == orderstore.JournalDropped || j.State == orderstore.JournalFailed {
			attempt := 0
			if ok {
				attempt = j.Attempt + 1
			}
			c := &tron.UnDelegateResourceContract{OwnerAddress: fl.Pool, Resource: resourceCode(o.Resource), Balance: fl.BalanceSun,
				ReceiverAddress: receiver}
			j, err = f.sign(ctx, tx, o, orderstore.PurposeUndelegate, fl.Seq, attempt, tron.Intent{Contract: c}, func(ctx context.Context) (*tron.Transaction, error) {
				return f.o.Node.UnDelegateResource(ctx, c)
			})
			if err != nil {
				if tron.Classify(err) != tron.Refused {
					return nil, nil, nil, err // retried at RetryEvery
				}
				// Refused: a lock still runs on the pool's record for the receiver (the
				// tier policy, or a delegation made before it), or the chain does not
				// show the stake there yet. Look again when the lock ends, not before.
				at := due5
				if ds, rerr := f.o.Node.GetDelegatedResourceV2(ctx, fl.Pool, receiver); rerr == nil {
					if until := lockedUntil(ds, o.Resource); until > 0 {
						// java-tron frees a lock once expire < the block's time: the first
						// block after it.
						at = time.UnixMilli(until).Add(2 * blockInterval)
						if head, herr := f.headTime(ctx); herr == nil && head > until {
							at = now.Add(blockInterval)
						} else if herr == nil {
							at = now.Add(time.Duration(until-head)*time.Millisecond + 2*blockInterval)
						}
					}
				}
				f.log.Info("undelegation not possible yet", "order", o.ID, "fill", fl.Seq, "next", at, "err", err)
				return nil, &at, nil, f.setDue(ctx, tx, o, at)
			}
		}
		if j.State == orderstore.JournalBroadcast {
			// The rental ends when the stake is back, not when we asked for it: wait
			// for the undelegation's block (its chain fact, or the node once the block
			// is deep enough). One that expires outside any block is signed again.
			if j, err = f.undelegationFate(ctx, tx, j); err != nil {
				return nil, nil, nil, err
			}
		}
		switch j.State {
		case orderstore.JournalSigned:
			pending = append(pending, j)
			done = false
		case orderstore.JournalLanded:
			hashes = append(hashes, j.TxID)
		}
	}
	retry := now.Add(f.o.RetryEvery)
	if !done {
		return nil, &retry, f.broadcastAll(pending), f.setDue(ctx, tx, o, retry)
	}
	if len(hashes) < own {
		// Undelegations still on their way to a block, or refused and signed again by the
		// next step.
		return nil, &retry, nil, f.setDue(ctx, tx, o, retry)
	}
	if err := orderstore.ReturnFills(ctx, tx, o.ID); err != nil {
		return nil, nil, nil, err
	}
	return hashes, nil, nil, nil
}

// undelegationFate settles a broadcast undelegation from the node when its block is deep
// enough, or marks it dropped when it expired outside any block; otherwise it is returned
// unchanged (still on its way).
func (f *Flow) undelegationFate(ctx context.Context, tx pgx.Tx, j orderstore.JournalEntry) (orderstore.JournalEntry, error) {
	info, err := f.o.Node.GetTransactionInfoByID(ctx, j.TxID)
	if err == nil {
		return f.settleFromNode(ctx, tx, j, info)
	}
	if !errors.Is(err, tron.ErrNotFound) {
		return j, err
	}
	head, err := f.headTime(ctx)
	if err != nil || head <= j.Expiration {
		return j, err
	}
	if err := orderstore.SetExpiredOutsideBlock(ctx, tx, j.TxID); err != nil {
		return j, err
	}
	j.State = orderstore.JournalDropped
	return j, nil
}
