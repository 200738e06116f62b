package orderflow

import (
	"context"
	"testing"
	"time"

	"rental/infra/orderstore"
	"rental/infra/tronsim"
	"rental/schemas/orders"
)

// The node refuses to build a delegation ({"Error": "class
// org.tron.core.exception.ContractValidateException : Account[...] not exists"}, here a
// receiver that was never activated and no activation asked): the fill fails and the order
// fails with 5002 and its charge reversed, instead of the step being retried forever.
func TestRefusedBuildFailsTheFillAndRefunds(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(100)
	to := e.receiver(false)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
	row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Failed)
	if row.Failure == nil || row.Failure.Code != 5002 || row.RefundedAmountSun != row.ChargedAmountSun {
		t.Fatalf("order %+v failure %+v", row.Record, row.Failure)
	}
	if bal, res := e.balance(acc); bal != 100_000_000 || res != 0 {
		t.Fatalf("balance %d reserved %d, want the charge back", bal, res)
	}
	e.invariants()
}

// Wallet.broadcastTransaction's BLOCK_UNSOLIDIFIED, NO_CONNECTION,
// NOT_ENOUGH_EFFECTIVE_CONNECTION and SERVER_BUSY come before the node took the
// transaction: the same signed bytes are broadcast again (no second signature) and the
// order is delivered. "P2P broadcast failed." comes after: the transaction is treated as
// broadcast, lands, and the order is delivered with that one delegation.
func TestBroadcastCodesKeepTheSameTransaction(t *testing.T) {
	for _, kind := range []tronsim.FaultKind{tronsim.FaultBlockUnsolidified, tronsim.FaultNoConnection,
		tronsim.FaultNotEnoughConn, tronsim.FaultServerBusy, tronsim.FaultP2PFailed} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t)
			e.startFlow()
			acc := e.account(100)
			to := e.receiver(true)
			e.control("/sim/faults", map[string]any{"kind": kind, "count": 2}, nil)
			o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
			row := e.waitStatus(acc, o.ID, 30*time.Second, orders.Active, orders.Failed)
			if row.Status != orders.Active || len(row.DelegateHashes) != 1 {
				t.Fatalf("order %+v", row.Record)
			}
			js, err := orderstore.Journal(context.Background(), e.db.Pool, o.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range js {
				if j.Purpose == orderstore.PurposeDelegate && j.Attempt != 0 {
					t.Fatalf("the delegation was signed again (attempt %d) after %s", j.Attempt, kind)
				}
			}
			e.invariants()
		})
	}
}

// Two orders of different tiers to one receiver from one pool: both are delivered, and each
// ends at its own expires_at with its own stake taken back (no lock of one holds the
// other's stake).
func TestTwoTiersToOneReceiverFromOnePool(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(100)
	to := e.receiver(true)
	long := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
	e.waitStatus(acc, long.ID, 20*time.Second, orders.Active)
	alone := e.delegated(to, orders.Energy)
	short := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "5m", receiver: to})
	e.waitStatus(acc, short.ID, 20*time.Second, orders.Active)
	if both := e.delegated(to, orders.Energy); both <= alone {
		t.Fatalf("delegated %d with both orders, %d with one", both, alone)
	}

	e.clock.Add(5*time.Minute + time.Second)
	e.waitStatus(acc, short.ID, 20*time.Second, orders.Expired)
	if got := e.delegated(to, orders.Energy); got != alone {
		t.Fatalf("after the 5m order ended %d SUN delegated, want the 1h order's %d", got, alone)
	}
	if row := e.waitStatus(acc, long.ID, time.Second, orders.Active); row.Status != orders.Active {
		t.Fatalf("the 1h order %s", row.Status)
	}
	e.clock.Add(time.Hour)
	e.waitStatus(acc, long.ID, 20*time.Second, orders.Expired)
	if got := e.delegated(to, orders.Energy); got != 0 {
		t.Fatalf("%d SUN still delegated after both orders ended", got)
	}
	e.invariants()
}

// DELEGATION_LOCK=tier: the first delegation to a receiver is locked for its tier; a second
// one while that lock runs is unlocked (a lock would reset the record's lock, TIP-542, or be
// refused as shorter than the remaining one). Both deliver, and the unlocked one is
// reclaimed at once while the locked one keeps its lock.
func TestTierLockPolicyNeverStacksLocks(t *testing.T) {
	e := newEnv(t)
	e.lock = LockTier
	e.startFlow()
	acc := e.account(100)
	to := e.receiver(true)
	first := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "5m", receiver: to})
	e.waitStatus(acc, first.ID, 20*time.Second, orders.Active)
	second := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
	e.waitStatus(acc, second.ID, 20*time.Second, orders.Active)

	ds, err := e.node.GetDelegatedResourceV2(context.Background(), e.pools[0].Address(), to)
	if err != nil {
		t.Fatal(err)
	}
	var locked, unlocked int64
	for _, d := range ds {
		if d.ExpireTimeForEnergy > 0 {
			locked += d.FrozenBalanceForEnergy
		} else {
			unlocked += d.FrozenBalanceForEnergy
		}
	}
	if locked == 0 || unlocked == 0 {
		t.Fatalf("records %+v: want the first order locked and the second unlocked", ds)
	}

	asked := e.sim.Head().Number
	requestReclaim(t, e, second.ID)
	row := e.waitStatus(acc, second.ID, 30*time.Second, orders.Reclaimed)
	info, err := e.node.GetTransactionInfoByID(context.Background(), *row.ReclaimHash)
	if err != nil || info.BlockNumber-asked > 20 {
		t.Fatalf("undelegation of the unlocked order: block %d, asked at %d (%v)", info.BlockNumber, asked, err)
	}
	if got := e.delegated(to, orders.Energy); got != locked {
		t.Fatalf("after the reclaim %d SUN delegated, want the locked order's %d", got, locked)
	}
	e.invariants()
}
