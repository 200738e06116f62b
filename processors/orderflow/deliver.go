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

// deliver activates the receiver when asked and needed, then signs and broadcasts one
// delegation per fill. It returns an action that broadcasts after commit.
func (f *Flow) deliver(ctx context.Context, tx pgx.Tx, o orderstore.Row, pre *loaded) (bool, action, error) {
	now := f.o.Now()
	js, err := pre.journalOf(ctx, tx, o.ID)
	if err != nil {
		return false, nil, err
	}
	receiver, err := tron.ParseAddress(o.Receiver)
	if err != nil {
		return false, nil, err
	}

	// Activation first: a delegation to an account that does not exist is refused.
	if o.ActivationAmountSun > 0 && !o.Activation.Performed {
		j, ok := latest(js, orderstore.PurposeActivate, -1)
		if ok && resignable(j) && j.Attempt < maxDelegateAttempts-1 {
			if j, err = f.confirmGone(ctx, tx, j); err != nil {
				return false, nil, err
			}
		}
		if !ok || (j.State == orderstore.JournalDropped && resignable(j) && j.Attempt < maxDelegateAttempts-1) {
			attempt := 0
			if ok {
				attempt = j.Attempt + 1
			}
			payer, ok := f.payer()
			if !ok {
				return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "no own account is configured to activate the receiver from")
			}
			owner := payer.Address()
			c := &tron.AccountCreateContract{OwnerAddress: owner, AccountAddress: receiver}
			j, err = f.sign(ctx, tx, o, orderstore.PurposeActivate, -1, attempt, tron.Intent{Contract: c}, func(ctx context.Context) (*tron.Transaction, error) {
				return f.o.Node.CreateAccount(ctx, c)
			})
			if err != nil {
				if f.buildGivesUp(o, err) {
					f.log.Info("activation refused at build", "order", o.ID, "err", err)
					return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "the node refused to activate the receiver")
				}
				return false, nil, err
			}
		}
		switch j.State {
		case orderstore.JournalSigned:
			return false, f.broadcastAll([]orderstore.JournalEntry{j}), f.setDue(ctx, tx, o, now.Add(f.o.RetryEvery))
		case orderstore.JournalDropped, orderstore.JournalFailed:
			return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "the receiver's activation was refused by the chain")
		case orderstore.JournalBroadcast, orderstore.JournalLanded:
			// Delegating needs the account in a block, not yet at confirmation depth.
			info, err := f.o.Node.GetTransactionInfoByID(ctx, j.TxID)
			if errors.Is(err, tron.ErrNotFound) {
				return f.landedOrDropped(ctx, tx, o, j)
			}
			if err != nil {
				return false, nil, err
			}
			if info.Result == "FAILED" {
				return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "the receiver's activation failed on chain")
			}
			if err := orderstore.SetActivated(ctx, tx, o.ID, j.TxID); err != nil {
				return false, nil, err
			}
			return true, nil, nil
		}
	}
	if o.Resource == orders.Activation {
		// Nothing to delegate: the order is delivered once its activation is (or was
		// already) on chain.
		return true, nil, f.setStatus(ctx, tx, o, orders.Delegated, now.Add(f.o.RetryEvery))
	}

	// Nothing above wrote fills (the activation's branch returns in every case).
	fs, err := pre.fillsOf(ctx, tx, o.ID)
	if err != nil {
		return false, nil, err
	}
	var pending []orderstore.JournalEntry
	allSent := true
	// The fills' broadcast marks travel in one batch after the loop (nothing in it reads
	// them), with the read of the hashes when everything was sent.
	var marks orderstore.Writes
	for _, fl := range fs {
		if fl.State != orderstore.FillReserved {
			continue
		}
		if fl.Source != orderstore.SourcePool && fl.Source != orderstore.SourceDeep {
			if err := f.buyFromProvider(ctx, tx, o, fl); err != nil {
				return false, nil, err
			}
			allSent = false // look again: bought (broadcast), or handed to the next provider
			continue
		}
		j, ok := latest(js, orderstore.PurposeDelegate, fl.Seq)
		if ok && resignable(j) && j.Attempt < maxDelegateAttempts-1 {
			if j, err = f.confirmGone(ctx, tx, j); err != nil {
				return false, nil, err
			}
		}
		if !ok || (j.State == orderstore.JournalDropped && resignable(j) && j.Attempt < maxDelegateAttempts-1) {
			attempt := 0
			if ok {
				attempt = j.Attempt + 1
			}
			intent, build, err := f.delegation(ctx, o, fl, receiver)
			if errors.Is(err, errUndeliverable) {
				if marks.Len() > 0 { // the failure sees the fills as they are
					if err := marks.Send(ctx, tx); err != nil {
						return false, nil, err
					}
				}
				return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, err.Error())
			}
			if err != nil {
				return false, nil, err
			}
			j, err = f.sign(ctx, tx, o, orderstore.PurposeDelegate, fl.Seq, attempt, intent, build)
			if err != nil {
				if f.buildGivesUp(o, err) {
					// The node refused to build it (the pool changed under us, the
					// receiver cannot take it): this part cannot be delivered, and is
					// refunded when the order settles.
					f.log.Info("delegation refused at build", "order", o.ID, "fill", fl.Seq, "err", err)
					if err := orderstore.SetFillState(ctx, tx, o.ID, fl.Seq, orderstore.FillFailed); err != nil {
						return false, nil, err
					}
					continue
				}
				return false, nil, err
			}
		}
		switch j.State {
		case orderstore.JournalSigned:
			pending = append(pending, j)
			allSent = false
		case orderstore.JournalDropped, orderstore.JournalFailed:
			if err := orderstore.SetFillState(ctx, tx, o.ID, fl.Seq, orderstore.FillFailed); err != nil {
				return false, nil, err
			}
		default: // broadcast or landed
			marks.FillBroadcast(o.ID, fl.Seq, j.TxID)
		}
	}
	if !allSent {
		if marks.Len() > 0 {
			if err := marks.Send(ctx, tx); err != nil {
				return false, nil, err
			}
		}
		return false, f.broadcastAndMark(o.ID, pending), f.setDue(ctx, tx, o, now.Add(f.o.RetryEvery))
	}
	sent := marks.BroadcastHashes(o.ID)
	if err := marks.Send(ctx, tx); err != nil {
		return false, nil, err
	}
	hashes := *sent
	if len(hashes) == 0 {
		onlyProviders, err := orderstore.OnlyProviderFills(ctx, tx, o.ID)
		if err != nil {
			return false, nil, err
		}
		if onlyProviders {
			return true, nil, f.fail(ctx, tx, o, apierr.InsufficientSupply, "the providers could not deliver the order")
		}
		return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "every delegation was refused by the chain")
	}
	// Settling at once is worth a step only when a delegation's block result is already
	// in: otherwise its chain fact, applied after this commit, advances the order (and the
	// LandGrace timer covers a fact that never comes).
	settleNow := false
	for _, j := range js {
		if j.Purpose == orderstore.PurposeDelegate && j.Settled() {
			settleNow = true
		}
	}
	if err := orderstore.MarkDelegated(ctx, tx, o.ID, hashes, now.Add(f.o.LandGrace)); err != nil {
		return false, nil, err
	}
	f.transitions.WithLabelValues(string(orders.Delegated)).Inc()
	return settleNow, nil, nil
}

// errUndeliverable marks a fill that can never be delegated as ordered.
var errUndeliverable = errors.New("undeliverable")

// buildGivesUp reports whether a failed build ends the attempt: a refusal (tron.Refused:
// the same request is refused again) at once, an answer the service does not recognise
// once the order is older than BuildRetryFor. Temporary answers are retried.
func (f *Flow) buildGivesUp(o orderstore.Row, err error) bool {
	if errors.Is(err, errNoGrant) {
		return true
	}
	switch tron.Classify(err) {
	case tron.Refused:
		return true
	case tron.Temporary:
		return false
	}
	return f.o.Now().Sub(time.Time(o.CreatedAt)) > f.o.BuildRetryFor
}

// delegation is the transaction that delivers a fill: a delegation from one of our pools
// locked as the lock policy says, or a rent call of the deep reserve paid by the first pool
// (the contract delegates from its own address, locked for the tier, and takes it back
// itself). The rent call is run as a constant call first: the node builds a non-constant
// call without running it, so one that would revert would land as REVERT and burn its fee.
func (f *Flow) delegation(ctx context.Context, o orderstore.Row, fl orderstore.Fill, receiver tron.Address) (tron.Intent,
	func(context.Context) (*tron.Transaction, error), error) {
	if fl.Source == orderstore.SourceDeep {
		payer, ok := f.payer()
		if f.o.Deep == nil || !ok {
			return tron.Intent{}, nil, fmt.Errorf("%w: the deep reserve is not configured", errUndeliverable)
		}
		secs := *o.DurationSeconds
		price, err := f.o.Deep.RentalPrice(ctx, fl.Amount, secs)
		if err != nil {
			return tron.Intent{}, nil, err
		}
		c := &tron.TriggerSmartContract{OwnerAddress: payer.Address(), ContractAddress: f.o.Deep.Contract(),
			CallValue: price, Data: f.o.Deep.RentCall(receiver, fl.Amount, secs)}
		return tron.Intent{Contract: c, FeeLimit: f.o.DeepFeeLimit}, func(ctx context.Context) (*tron.Transaction, error) {
			if err := preflight(ctx, f.o.Node, c); err != nil {
				return nil, err
			}
			return f.o.Node.TriggerSmartContract(ctx, c, f.o.DeepFeeLimit)
		}, nil
	}
	lock, period, err := f.lockFor(ctx, o, fl, receiver)
	if err != nil {
		return tron.Intent{}, nil, err
	}
	c := &tron.DelegateResourceContract{OwnerAddress: fl.Pool, Resource: resourceCode(o.Resource), Balance: fl.BalanceSun,
		ReceiverAddress: receiver, Lock: lock, LockPeriod: period}
	return tron.Intent{Contract: c}, func(ctx context.Context) (*tron.Transaction, error) {
		return f.o.Node.DelegateResource(ctx, c)
	}, nil
}

// lockFor applies the lock policy to one fill. Under LockTier the delegation is locked for
// the tier (capped by the chain's getMaxDelegateLockPeriod) only when the pool's record
// for this receiver holds no live lock of the resource: java-tron keeps one locked record
// per (owner, receiver), and a second lock would reset it (TIP-542) or be refused as
// shorter than the remaining one.
func (f *Flow) lockFor(ctx context.Context, o orderstore.Row, fl orderstore.Fill, receiver tron.Address) (bool, int64, error) {
	if f.o.LockPolicy != LockTier {
		return false, 0, nil
	}
	ds, err := f.o.Node.GetDelegatedResourceV2(ctx, fl.Pool, receiver)
	if err != nil {
		return false, 0, fmt.Errorf("read the receiver's delegations: %w", err)
	}
	if until := lockedUntil(ds, o.Resource); until > 0 {
		head, err := f.headTime(ctx)
		if err != nil {
			return false, 0, err
		}
		if until >= head { // java-tron: a lock holds while !(expire < now)
			return false, 0, nil
		}
	}
	period, err := orders.LockPeriodBlocks(*o.DurationSeconds, f.lockCap.get(ctx, f.o.Node, f.o.Now()))
	if err != nil {
		return false, 0, fmt.Errorf("%w: %v", errUndeliverable, err)
	}
	return true, period, nil
}

// lockedUntil is the expiry (unix ms) of the locked delegation of resource among ds, 0 when
// there is none.
func lockedUntil(ds []tron.DelegatedResource, r orders.Resource) int64 {
	var until int64
	for _, d := range ds {
		e, bal := d.ExpireTimeForEnergy, d.FrozenBalanceForEnergy
		if r == orders.Bandwidth {
			e, bal = d.ExpireTimeForBandwidth, d.FrozenBalanceForBandwidth
		}
		if bal > 0 && e > until {
			until = e
		}
	}
	return until
}

// preflight runs a contract call as a constant call and refuses it when it would revert.
func preflight(ctx context.Context, node Node, c *tron.TriggerSmartContract) error {
	ext, err := node.TriggerConstantContract(ctx, c)
	if err != nil {
		return err
	}
	if ext.Transaction != nil && len(ext.Transaction.Ret) > 0 && ext.Transaction.Ret[0].ContractRet != "" &&
		ext.Transaction.Ret[0].ContractRet != "SUCCESS" {
		return &tron.NodeError{Endpoint: "triggerconstantcontract", Code: tron.CodeContractExe,
			Message: ext.Transaction.Ret[0].ContractRet + ": " + ext.Result.MessageText()}
	}
	return nil
}

// maxDelegateAttempts bounds how often one fill's delegation is signed.
const maxDelegateAttempts = 3
