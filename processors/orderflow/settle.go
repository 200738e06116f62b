package orderflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/orders"
)

// settle waits for every delegation's block result (chain facts set the journal rows),
// then confirms what landed after checking the receiver's delegated balance on chain, or
// fails the order when nothing did.
func (f *Flow) settle(ctx context.Context, tx pgx.Tx, o orderstore.Row, pre *loaded) (bool, action, error) {
	now := f.o.Now()
	js, err := pre.journalOf(ctx, tx, o.ID)
	if err != nil {
		return false, nil, err
	}
	fs, err := pre.fillsOf(ctx, tx, o.ID)
	if err != nil {
		return false, nil, err
	}
	// The fills' new states are kept in fs as written; the journal is read again only when
	// the node's answer settled a row of it here (normally chain facts did before).
	journalWritten := false
	for i, fl := range fs {
		if fl.State != orderstore.FillBroadcast {
			continue
		}
		j, ok := latest(js, orderstore.PurposeDelegate, fl.Seq)
		if !ok {
			return false, nil, fmt.Errorf("fill %d broadcast without a journal row", fl.Seq)
		}
		if !j.Settled() {
			journalWritten = true
			info, err := f.o.Node.GetTransactionInfoByID(ctx, j.TxID)
			if errors.Is(err, tron.ErrNotFound) {
				return f.landedOrDropped(ctx, tx, o, j)
			}
			if err != nil {
				return false, nil, err
			}
			// In a block. Its chain fact normally settles it; when the fact is late (the
			// follower or this consumer group is behind) and the node shows the block at
			// the confirmation depth, the node's answer settles it instead.
			if j, err = f.settleFromNode(ctx, tx, j, info); err != nil {
				return false, nil, err
			}
			if !j.Settled() {
				return f.wait(ctx, tx, o, now.Add(f.o.LandGrace))
			}
		}
		state := orderstore.FillLanded
		if j.State != orderstore.JournalLanded || (j.Result != nil && *j.Result != "SUCCESS") {
			state = orderstore.FillFailed
		}
		if err := orderstore.SetFillState(ctx, tx, o.ID, fl.Seq, state); err != nil {
			return false, nil, err
		}
		fs[i].State = state
	}
	if journalWritten {
		if js, err = orderstore.Journal(ctx, tx, o.ID); err != nil {
			return false, nil, err
		}
	}
	delivered, byPool, firstBlock := f.landedTotals(fs, js)
	if o.Resource != orders.Activation && delivered == 0 {
		return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "no delegation landed on chain before its expiration")
	}
	if ok, err := f.verifyDelivered(ctx, o, byPool); err != nil || !ok {
		if err != nil {
			return false, nil, err
		}
		return f.wait(ctx, tx, o, now.Add(f.o.RetryEvery))
	}
	return false, nil, f.confirm(ctx, tx, o, delivered, firstBlock)
}

// landedTotals is what an order's landed fills delivered: the units, each pool's staked
// balance to find on the receiver, and delegated_at, the block of the first delegation that
// landed (whichever pass of settling saw it land).
func (f *Flow) landedTotals(fs []orderstore.Fill, js []orderstore.JournalEntry) (delivered int64, byPool map[tron.Address]int64, firstBlock *time.Time) {
	byPool = map[tron.Address]int64{}
	for _, fl := range fs {
		if fl.State != orderstore.FillLanded {
			continue
		}
		delivered += fl.Amount
		if fl.Source == orderstore.SourceDeep {
			// The contract sized the delegation at its block's weights: allow the drift.
			byPool[fl.Pool] += fl.BalanceSun * (10_000 - f.o.MarginBps) / 10_000
		} else {
			byPool[fl.Pool] += fl.BalanceSun
		}
		if j, ok := latest(js, orderstore.PurposeDelegate, fl.Seq); ok && j.BlockTime != nil && (firstBlock == nil || j.BlockTime.Before(*firstBlock)) {
			t := *j.BlockTime
			firstBlock = &t
		}
	}
	return delivered, byPool, firstBlock
}

// verifyDelivered checks the receiver's limit on chain: each pool's delegation to the
// receiver covers at least what the order's landed fills put there (byPool). false: not
// yet, look again shortly.
func (f *Flow) verifyDelivered(ctx context.Context, o orderstore.Row, byPool map[tron.Address]int64) (bool, error) {
	receiver, _ := tron.ParseAddress(o.Receiver)
	for pool, want := range byPool {
		ds, err := f.o.Node.GetDelegatedResourceV2(ctx, pool, receiver)
		if err != nil {
			return false, fmt.Errorf("verify delegation: %w", err)
		}
		var have int64
		for _, d := range ds {
			if o.Resource == orders.Bandwidth {
				have += d.FrozenBalanceForBandwidth
			} else {
				have += d.FrozenBalanceForEnergy
			}
		}
		if have < want {
			f.log.Warn("receiver's delegated balance below the order's fills; checking again", "order", o.ID, "pool", pool, "have", have, "want", want)
			return false, nil
		}
	}
	return true, nil
}

// confirm records the delivery: the charge captured, a pro-rata refund for a partial
// delivery, the totals, order.confirmed, the order active and its expiry timer.
func (f *Flow) confirm(ctx context.Context, tx pgx.Tx, o orderstore.Row, delivered int64, firstBlock *time.Time) error {
	now := f.o.Now()
	d := deliveryOf(o, delivered, firstBlock, now)
	if err := f.o.Ledger.CaptureHold(ctx, tx, o.ID, o.ChargedAmountSun); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	if err := f.refundPartial(ctx, tx, o, d); err != nil {
		return err
	}
	if o.Resource == orders.Energy {
		if err := f.o.Ledger.AddOrderTotals(ctx, tx, o.AccountID, 0, d.Delivered); err != nil {
			return err
		}
	}
	// Confirmed, and at once active (the spec's automatic step): both in this transaction,
	// so the order is due next at its expiry (an activation never).
	row, err := orderstore.Confirm(ctx, tx, o.ID, d)
	if err != nil {
		return err
	}
	f.confirmed(o, now)
	return f.emit(ctx, tx, row, orders.EventConfirmed, row.Record.Confirmed())
}

// deliveryOf is what confirming o records: delivered units (an activation's whole amount),
// partial and its pro-rata refund, delegated at the block of the first delegation that
// landed (now, should a simulated chain run ahead of the wall), and the expiry a tier
// gives.
func deliveryOf(o orderstore.Row, delivered int64, firstBlock *time.Time, now time.Time) orderstore.Delivery {
	at := now
	if firstBlock != nil && firstBlock.Before(now) {
		at = *firstBlock
	}
	d := orderstore.Delivery{Delivered: delivered, DelegatedAt: at.UTC().Truncate(time.Millisecond)}
	if o.Resource == orders.Activation {
		d.Delivered = o.Amount
	} else {
		d.Partial = delivered < o.Amount
		d.RefundSun = orders.ProRataRefund(o.EnergyAmountSun, o.Amount, delivered)
	}
	if o.DurationSeconds != nil {
		t := d.DelegatedAt.Add(time.Duration(*o.DurationSeconds) * time.Second)
		d.ExpiresAt = &t
	}
	return d
}

// refundPartial credits back what a partial delivery did not deliver (d.RefundSun).
func (f *Flow) refundPartial(ctx context.Context, tx pgx.Tx, o orderstore.Row, d orderstore.Delivery) error {
	if d.RefundSun <= 0 {
		return nil
	}
	if err := f.o.Ledger.Refund(ctx, tx, o.AccountID, "partial_delivery:"+o.ID, d.RefundSun, "partial_delivery", o.ID); err != nil {
		return fmt.Errorf("partial refund: %w", err)
	}
	return nil
}

// confirmed counts a confirmation (to confirmed, then active) and its time from acceptance.
func (f *Flow) confirmed(o orderstore.Row, now time.Time) {
	f.transitions.WithLabelValues(string(orders.Confirmed)).Inc()
	f.transitions.WithLabelValues(string(orders.Active)).Inc()
	f.deliverySec.Observe(now.Sub(time.Time(o.CreatedAt)).Seconds())
}

// txLifetime is how long after its reference block a transaction the node builds expires:
// java-tron's Wallet.createTransactionCapsule sets expiration to the head block's time plus
// TRANSACTION_DEFAULT_EXPIRATION_TIME (60 s, Constant.java).
const txLifetime = 60 * time.Second

// resendAfter is how long (chain time) a broadcast transaction may be in no block before the
// processor sends it again: two of TRON's block intervals.
const resendAfter = 2 * blockInterval

// landedOrDropped decides about a broadcast transaction the node does not show in a
// block: past its expiration on the chain's clock it can never land (dropped); before, the
// order waits. A transaction in no block for more than resendAfter is sent again, the same
// signed bytes, once per wait: a node that lost it (restarted with an empty pending pool,
// or dropped it) takes it anew and the order is delivered within a block or two, instead of
// after the rest of the transaction's minute and a new signature; a node that still holds
// it answers DUP_TRANSACTION_ERROR (java-tron's Wallet.broadcastTransaction looks the id up
// among recent transactions, pending ones included), and one txid lands at most once.
func (f *Flow) landedOrDropped(ctx context.Context, tx pgx.Tx, o orderstore.Row, j orderstore.JournalEntry) (bool, action, error) {
	head, err := f.headTime(ctx)
	if err != nil {
		return false, nil, err
	}
	if head > j.Expiration {
		if err := orderstore.SetExpiredOutsideBlock(ctx, tx, j.TxID); err != nil {
			return false, nil, err
		}
		return true, nil, nil
	}
	var resend action
	if built := j.Expiration - txLifetime.Milliseconds(); head-built > resendAfter.Milliseconds() {
		resend = f.resend(j)
	}
	_, _, err = f.wait(ctx, tx, o, f.o.Now().Add(f.o.RetryEvery))
	return false, resend, err
}

// resend broadcasts a journaled transaction again (landedOrDropped). The journal row
// stays as it is (SetSent changes only a row still signed): its block result settles it as
// before, and a refusal (expired, TaPoS) leaves it to expire and be signed anew.
func (f *Flow) resend(j orderstore.JournalEntry) action {
	return func(ctx context.Context) (bool, error) {
		f.log.Info("a broadcast transaction is in no block after two block intervals; sending it again", "txid", j.TxID, "purpose", j.Purpose)
		f.resent.Inc()
		_, _, err := f.broadcast(ctx, j)
		return false, err
	}
}

// settleFromNode records a transaction's block result from the node when its block is at
// least Confirmations deep and solidified; otherwise j is returned unchanged.
func (f *Flow) settleFromNode(ctx context.Context, tx pgx.Tx, j orderstore.JournalEntry, info *tron.TransactionInfo) (orderstore.JournalEntry, error) {
	head, err := f.o.Node.GetHead(ctx)
	if err != nil {
		return j, err
	}
	if head.BlockHeader.RawData.Number-info.BlockNumber < int64(f.o.Confirmations) {
		return j, nil
	}
	// Never above the solidified block, whatever Confirmations says.
	solid, err := f.o.Node.GetSolidHead(ctx)
	if err != nil {
		return j, err
	}
	if info.BlockNumber > solid.Number() {
		return j, nil
	}
	state, result := orderstore.JournalLanded, "SUCCESS"
	if info.Result == "FAILED" {
		state, result = orderstore.JournalFailed, "FAILED"
	}
	bt := time.UnixMilli(info.BlockTimeStamp).UTC()
	if err := orderstore.SetBlockResult(ctx, tx, j.TxID, state, result, info.BlockNumber, bt); err != nil {
		return j, err
	}
	j.State, j.Result, j.BlockTime = state, &result, &bt
	return j, nil
}
