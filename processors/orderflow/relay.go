package orderflow

// Relayed transactions (POST /v1/transactions; docs/orders.md "Relayed transactions"): the
// order delivers the energy the customer's call needs like any energy order; this loop
// broadcasts the call unchanged as soon as the energy is on the owner (the delegation is
// in a block: the node's head, not the confirmation depth), follows it to its block, and
// then asks for the delegation back (order.reclaimed) or, when the call can never run
// (refused at broadcast, expired outside any block), refunds the order in full once it is
// delivered (order.refunded; the stake comes back as for any refunded order).
//
// Every state change is written under the order's lock and only when the state read
// there is still the one acted on, so replicas running this loop together change each
// state once. Broadcasting the same signed bytes twice is harmless: the node answers
// DUP_TRANSACTION_ERROR, which counts as broadcast.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/orders"
)

// relayBatch bounds the pending relayed transactions looked at per pass.
const relayBatch = 64

// followRelays runs passes over the pending relayed transactions every `every` until ctx
// ends.
func (f *Flow) followRelays(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := f.RelayPass(ctx); err != nil && ctx.Err() == nil {
			f.log.Warn("relayed transactions pass failed", "err", err)
		}
	}
}

// RelayPass advances every pending relayed transaction as far as it can go now.
func (f *Flow) RelayPass(ctx context.Context) error {
	ps, err := orderstore.PendingRelays(ctx, f.o.Pool, relayBatch)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if err := f.advanceRelay(ctx, p); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			f.log.Warn("relayed transaction step failed; retried next pass", "order", p.OrderID, "txid", p.TxID, "err", err)
		}
	}
	return nil
}

func (f *Flow) advanceRelay(ctx context.Context, p orderstore.PendingRelay) error {
	st := p.State
	switch {
	case st.Status == orders.TxWaiting:
		return f.relayWaiting(ctx, p)
	case st.Status == orders.TxBroadcast:
		return f.relayFollow(ctx, p)
	case st.Status.Ran():
		// The call ran: the energy is spent, take the delegation back as soon as the
		// order is active (a reclaim before confirmation would wait for its expiry).
		switch {
		case p.OrderStatus == orders.Active:
			return f.relayWrite(ctx, p, func(tx pgx.Tx, o orderstore.Row) error {
				_, fresh, err := orderstore.RequestReclaim(ctx, tx, o.ID, f.o.Now())
				if err == nil && fresh {
					err = orderstore.Enqueue(ctx, tx, o.ID, orderstore.IntentReclaim)
				}
				if err != nil {
					return err
				}
				return orderstore.SetRelayState(ctx, tx, o.ID, st, false, f.o.Now())
			})
		case p.OrderStatus.Terminal():
			return f.setRelay(ctx, p, st, false)
		}
		return nil
	case st.Status.NeverRan():
		switch {
		case p.OrderStatus == orders.Active || p.OrderStatus == orders.Confirmed:
			return f.relayWrite(ctx, p, func(tx pgx.Tx, o orderstore.Row) error {
				if err := f.refundNeverRan(ctx, tx, o); err != nil {
					return err
				}
				return orderstore.SetRelayState(ctx, tx, o.ID, st, false, f.o.Now())
			})
		case p.OrderStatus.Terminal():
			// Failed (charge reversed by the pipeline) or ended: nothing more to give back.
			return f.setRelay(ctx, p, st, false)
		}
	}
	return nil
}

// relayWaiting broadcasts the call once the owner has the energy it needs (or, should the
// owner have spent some meanwhile, once the order is confirmed: what was sold is there).
func (f *Flow) relayWaiting(ctx context.Context, p orderstore.PendingRelay) error {
	st := p.State
	switch p.OrderStatus {
	case orders.Failed, orders.Refunded, orders.Expired, orders.Reclaimed:
		// Never delivered (the pipeline reversed the charge): the call is not sent.
		st.Status = orders.TxRefused
		return f.setRelay(ctx, p, st, false)
	case orders.Delegated, orders.Confirmed, orders.Active:
	default:
		return f.relayExpiredYet(ctx, p)
	}
	owner, err := tron.ParseAddress(p.Owner)
	if err != nil {
		return err
	}
	res, err := f.o.Node.GetAccountResource(ctx, owner)
	if err != nil {
		return err
	}
	if res.EnergyLimit-res.EnergyUsed < p.EnergyRequired && p.OrderStatus == orders.Delegated {
		return f.relayExpiredYet(ctx, p)
	}
	var signed tron.Transaction
	if err := json.Unmarshal(p.Signed, &signed); err != nil {
		return fmt.Errorf("stored transaction: %w", err)
	}
	_, berr := f.o.Node.BroadcastTransaction(ctx, &signed)
	switch tron.ClassifyBroadcast(berr) {
	case tron.BroadcastAccepted:
		st.Status = orders.TxBroadcast
		f.log.Info("relayed transaction broadcast", "order", p.OrderID, "txid", p.TxID)
		return f.setRelay(ctx, p, st, true)
	case tron.BroadcastRefused:
		st.Status = orders.TxRefused
		f.log.Info("relayed transaction refused by the node", "order", p.OrderID, "txid", p.TxID, "err", berr)
		return f.setRelay(ctx, p, st, true)
	}
	return berr // retried next pass
}

// relayFollow records the call's result once it is in a block, or its expiry outside any.
func (f *Flow) relayFollow(ctx context.Context, p orderstore.PendingRelay) error {
	info, err := f.o.Node.GetTransactionInfoByID(ctx, p.TxID)
	if errors.Is(err, tron.ErrNotFound) {
		return f.relayExpiredYet(ctx, p)
	}
	if err != nil {
		return err
	}
	st := p.State
	block, used, fee := info.BlockNumber, info.Receipt.EnergyUsageTotal, info.Receipt.EnergyFee
	result := info.Receipt.Result
	if result == "" {
		result = "SUCCESS" // java-tron prints contractRet DEFAULT as absent; a call that ran and failed names its result
	}
	st.Block, st.Result, st.EnergyUsed, st.EnergyFeeSun = &block, &result, &used, &fee
	st.Status = orders.TxConfirmed
	if info.Failed() || result != "SUCCESS" {
		st.Status = orders.TxFailed
	}
	f.log.Info("relayed transaction ran", "order", p.OrderID, "txid", p.TxID, "result", result, "energy_used", used, "energy_fee_sun", fee)
	return f.setRelay(ctx, p, st, true)
}

// relayExpiredYet marks the call expired once the chain's head is past its expiration
// without it (java-tron packs no expired transaction).
func (f *Flow) relayExpiredYet(ctx context.Context, p orderstore.PendingRelay) error {
	head, err := f.headTime(ctx)
	if err != nil || head <= p.Expiration.UnixMilli() {
		return err
	}
	if p.State.Status == orders.TxBroadcast {
		// The node may have packed it in the block that passed the expiration.
		if _, err := f.o.Node.GetTransactionInfoByID(ctx, p.TxID); err == nil || !errors.Is(err, tron.ErrNotFound) {
			return err
		}
	}
	st := p.State
	st.Status = orders.TxExpired
	return f.setRelay(ctx, p, st, true)
}

// relayWrite runs fn under the order's lock when the transaction's state there is still
// p's (another replica may have moved it).
func (f *Flow) relayWrite(ctx context.Context, p orderstore.PendingRelay, fn func(pgx.Tx, orderstore.Row) error) error {
	return pgx.BeginFunc(ctx, f.o.Pool, func(tx pgx.Tx) error {
		o, err := orderstore.Lock(ctx, tx, p.OrderID)
		if err != nil {
			return err
		}
		if o.Transaction == nil || o.Transaction.Status != p.State.Status || o.Status != p.OrderStatus {
			return nil // moved on meanwhile; the next pass sees where it is
		}
		return fn(tx, o)
	})
}

// setRelay records st as the transaction's state (relayWrite's conditions).
func (f *Flow) setRelay(ctx context.Context, p orderstore.PendingRelay, st orders.RelayedTransaction, pending bool) error {
	moved := false
	err := f.relayWrite(ctx, p, func(tx pgx.Tx, o orderstore.Row) error {
		moved = true
		return orderstore.SetRelayState(ctx, tx, o.ID, st, pending, f.o.Now())
	})
	if err == nil && moved && st.Status != p.State.Status {
		f.relayed.WithLabelValues(string(st.Status)).Inc()
	}
	return err
}

// refundNeverRan gives the whole charge of a delivered order back: its call never ran.
// The order becomes refunded (order.refunded); the processor then takes the delegation
// back as for any refunded order (the order is due at once).
func (f *Flow) refundNeverRan(ctx context.Context, tx pgx.Tx, o orderstore.Row) error {
	amount := o.ChargedAmountSun - o.RefundedAmountSun
	now := f.o.Now().UTC().Truncate(time.Millisecond)
	if amount > 0 {
		if err := f.o.Ledger.Refund(ctx, tx, o.AccountID, "transaction_never_ran:"+o.ID, amount, orders.RefundReasonNeverRan, o.ID); err != nil {
			return err
		}
	}
	if err := orderstore.MarkRefunded(ctx, tx, o.ID, orders.RefundReasonNeverRan, now); err != nil {
		return err
	}
	o.Status, o.RefundedAmountSun = orders.Refunded, o.ChargedAmountSun
	f.transitions.WithLabelValues(string(orders.Refunded)).Inc()
	return f.emit(ctx, tx, o, orders.EventRefunded, o.Record.RefundedEvent(orders.RefundReasonNeverRan, now))
}
