package orderflow

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/orderstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// The whole life of an energy order on the simulated chain: delegated with a lock covering
// the tier, order.confirmed once the chain fact lands and the receiver's delegation is
// verified, the charge captured to the SUN, then at expires_at undelegated and expired.
func TestOrderLifecycleOnTheSimulator(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(100)
	to := e.receiver(true)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "5m", receiver: to})
	total := o.TotalAmountSun // 65,000 × 80 SUN

	row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Active)
	if row.DeliveredAmount != 65_000 || row.Partial || len(row.DelegateHashes) != 1 || row.DelegatedAt == nil || row.ExpiresAt == nil {
		t.Fatalf("active order %+v", row.Record)
	}
	if got := time.Time(*row.ExpiresAt).Sub(time.Time(*row.DelegatedAt)); got != 5*time.Minute {
		t.Fatalf("expires_at - delegated_at = %s, want the 5m tier", got)
	}
	if d := e.delegated(to, orders.Energy); d <= 0 {
		t.Fatalf("no delegation to the receiver on chain")
	}
	bal, res := e.balance(acc)
	if bal != 100_000_000-total || res != 0 {
		t.Fatalf("balance %d reserved %d, want %d and 0", bal, res, 100_000_000-total)
	}
	evs := e.events(o.ID)
	if len(evs) != 1 || evs[0].Event != orders.EventConfirmed {
		t.Fatalf("events %v, want one order.confirmed", evs)
	}
	var c orders.ConfirmedData
	if err := json.Unmarshal(evs[0].Data, &c); err != nil {
		t.Fatal(err)
	}
	if c.OrderID != o.ID || c.ClientOrderID != o.ClientOrderID || c.DelegateHash == nil || *c.DelegateHash != row.DelegateHashes[0] ||
		c.DeliveredAmount != 65_000 || c.TotalAmountSun != total || c.RefundedAmountSun != 0 || c.Tier == nil || *c.Tier != "5m" ||
		c.DurationSeconds == nil || *c.DurationSeconds != 300 || c.Receiver != to.String() || c.Activation.Performed {
		t.Fatalf("order.confirmed data %+v", c)
	}
	// Every field the spec lists is present in the JSON.
	var raw map[string]any
	_ = json.Unmarshal(evs[0].Data, &raw)
	for _, f := range []string{"order_id", "client_order_id", "batch_id", "subscription_id", "resource", "amount", "delivered_amount",
		"partial", "tier", "duration_seconds", "receiver", "delegate_hash", "delegate_hashes", "delegated_at", "expires_at",
		"total_amount_sun", "refunded_amount_sun", "activation"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("order.confirmed lacks %s", f)
		}
	}

	// The rental window ends: the chain's lock is over and the wall clock is past expires_at.
	if _, err := e.sim.Mine(120); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(5*time.Minute + time.Second)
	row = e.waitStatus(acc, o.ID, 20*time.Second, orders.Expired)
	deadline := time.Now().Add(10 * time.Second)
	for e.delegated(to, orders.Energy) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the delegation was not taken back on chain")
		}
		time.Sleep(100 * time.Millisecond)
	}
	evs = e.events(o.ID)
	if len(evs) != 2 || evs[1].Event != orders.EventExpired {
		t.Fatalf("events %v, want order.confirmed then order.expired", evs)
	}
	var x orders.EndedData
	_ = json.Unmarshal(evs[1].Data, &x)
	if x.ExpiredAt == nil || x.ReclaimedAt != nil || x.ReclaimHash == nil || x.RefundedAmountSun != 0 {
		t.Fatalf("order.expired data %+v", x)
	}
	if bal2, _ := e.balance(acc); bal2 != bal {
		t.Fatalf("expiry changed the balance: %d -> %d (no refund of a rental)", bal, bal2)
	}
	e.invariants()
}

// activate = true on a receiver that never existed: the account is created on chain first,
// then the delegation; the activation fee is charged and reported.
func TestActivationBeforeDelegation(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(100)
	to := e.receiver(false)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 32_000, tier: "1h", activate: true, receiver: to})
	row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Active)
	if !row.Activation.Performed || row.Activation.Hash == nil || row.Activation.AmountSun != 1_500_000 {
		t.Fatalf("activation %+v", row.Activation)
	}
	acct, err := e.node.GetAccount(context.Background(), to)
	if err != nil || !acct.Exists() {
		t.Fatalf("receiver not activated on chain: %v", err)
	}
	if bal, _ := e.balance(acc); bal != 100_000_000-32_000*80-1_500_000 {
		t.Fatalf("balance %d", bal)
	}
	e.invariants()
}

// Each fault of the simulator ends in the specified failure path: order failed with 5002,
// the whole charge reversed (refund_complete, balance.credited with reason refund and the
// order as reference_id), available back to where it was.
func TestFaultsFailTheOrderAndReverseTheCharge(t *testing.T) {
	for _, tc := range []struct {
		fault  string
		blocks int
	}{
		{"reject_delegation", 0},
		{"drop_tx", 0},
		{"slow_confirm", 40}, // held past the transaction's 60 s expiration: it can never land
	} {
		t.Run(tc.fault, func(t *testing.T) {
			e := newEnv(t)
			e.startFlow()
			acc := e.account(100)
			to := e.receiver(true)
			e.control("/sim/faults", map[string]any{"kind": tc.fault, "count": 1, "blocks": tc.blocks}, nil)
			o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
			row := e.waitStatus(acc, o.ID, 30*time.Second, orders.Failed)
			if row.Failure == nil || row.Failure.Code != 5002 || row.Failure.Slug != "delegation_failed" || row.RefundedAmountSun != row.ChargedAmountSun {
				t.Fatalf("failed order %+v failure %+v", row.Record, row.Failure)
			}
			if bal, res := e.balance(acc); bal != 100_000_000 || res != 0 {
				t.Fatalf("balance %d reserved %d after the reversal, want 100 TRX and 0", bal, res)
			}
			evs := e.events(o.ID)
			if len(evs) != 1 || evs[0].Event != orders.EventFailed {
				t.Fatalf("events %v", evs)
			}
			var fd orders.FailedData
			_ = json.Unmarshal(evs[0].Data, &fd)
			if !fd.RefundComplete || fd.Failure.Code != 5002 || fd.ChargedAmountSun != o.TotalAmountSun || fd.RefundedAmountSun != o.TotalAmountSun {
				t.Fatalf("order.failed %+v", fd)
			}
			var credited int
			err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE topic = 'events.accounts.v1'
				AND convert_from(value, 'UTF8')::jsonb->>'event' = 'balance.credited'
				AND convert_from(value, 'UTF8')::jsonb->'data'->>'reason' = 'refund'
				AND convert_from(value, 'UTF8')::jsonb->'data'->>'reference_id' = $1`, o.ID).Scan(&credited)
			if err != nil || credited != 1 {
				t.Fatalf("balance.credited refunds for the order: %d (%v), want 1", credited, err)
			}
			if d := e.delegated(to, orders.Energy); d != 0 {
				t.Fatalf("a failed order left %d SUN delegated", d)
			}
			e.invariants()
		})
	}
}

// node_down: the processor retries through a node outage and delivers.
func TestNodeDownIsRetried(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(100)
	to := e.receiver(true)
	e.control("/sim/faults", map[string]any{"kind": "node_down", "count": 6}, nil)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
	e.waitStatus(acc, o.ID, 30*time.Second, orders.Active)
	e.invariants()
}

// A pool too small for the order: what it has is delivered, partial is set and the
// undelivered share is refunded at once (order.confirmed carries it).
func TestPartialDeliveryRefundsProRata(t *testing.T) {
	e := newEnv(t, 1_000) // 1,000 TRX staked: far less energy than asked
	e.startFlow()
	acc := e.account(5_000)
	to := e.receiver(true)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 10_000_000, tier: "1h", receiver: to})
	row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Active, orders.Failed)
	if row.Status != orders.Active || !row.Partial || row.DeliveredAmount <= 0 || row.DeliveredAmount >= o.Amount {
		t.Fatalf("order %+v", row.Record)
	}
	want := orders.ProRataRefund(o.EnergyAmountSun, o.Amount, row.DeliveredAmount)
	if row.RefundedAmountSun != want || want <= 0 {
		t.Fatalf("refunded %d, want %d", row.RefundedAmountSun, want)
	}
	bal, res := e.balance(acc)
	if bal != 5_000_000_000-o.TotalAmountSun+want || res != 0 {
		t.Fatalf("balance %d reserved %d", bal, res)
	}
	evs := e.events(o.ID)
	var c orders.ConfirmedData
	_ = json.Unmarshal(evs[0].Data, &c)
	if !c.Partial || c.RefundedAmountSun != want || c.DeliveredAmount != row.DeliveredAmount {
		t.Fatalf("order.confirmed %+v", c)
	}
	e.invariants()
}

// A reclaim request ends the rental early: the pools delegate unlocked (DELEGATION_LOCK
// none), so the undelegation is in a block within 20 blocks of the request;
// order.reclaimed, no refund.
func TestReclaim(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(100)
	to := e.receiver(true)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "5m", receiver: to})
	e.waitStatus(acc, o.ID, 20*time.Second, orders.Active)
	bal, _ := e.balance(acc)
	asked := e.sim.Head().Number
	requestReclaim(t, e, o.ID)
	row := e.waitStatus(acc, o.ID, 30*time.Second, orders.Reclaimed)
	if row.RefundedAmountSun != 0 {
		t.Fatalf("reclaim refunded %d", row.RefundedAmountSun)
	}
	info, err := e.node.GetTransactionInfoByID(context.Background(), *row.ReclaimHash)
	if err != nil {
		t.Fatal(err)
	}
	if info.BlockNumber-asked > 20 {
		t.Fatalf("the undelegation landed in block %d, %d blocks after the reclaim (want within 20)", info.BlockNumber, info.BlockNumber-asked)
	}
	if d := e.delegated(to, orders.Energy); d != 0 {
		t.Fatalf("%d SUN still delegated after the reclaim", d)
	}
	evs := e.events(o.ID)
	if evs[len(evs)-1].Event != orders.EventReclaimed {
		t.Fatalf("events %v", evs)
	}
	var x orders.EndedData
	_ = json.Unmarshal(evs[len(evs)-1].Data, &x)
	if x.ReclaimedAt == nil || x.ReclaimHash == nil {
		t.Fatalf("order.reclaimed %+v", x)
	}
	if b, _ := e.balance(acc); b != bal {
		t.Fatalf("reclaim changed the balance %d -> %d", bal, b)
	}
	e.invariants()
}

func requestReclaim(t *testing.T, e *env, id string) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE orders SET reclaim_requested_at = now(), next_due_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := orderstore.Enqueue(ctx, tx, id, orderstore.IntentReclaim); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Support refunds a delivered order: refunded with the reason, order.refunded, the rest
// of the charge back on the balance with balance.credited (reason refund); once only.
func TestSupportRefund(t *testing.T) {
	e := newEnv(t)
	f := e.startFlowReturning()
	acc := e.account(100)
	to := e.receiver(true)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
	e.waitStatus(acc, o.ID, 20*time.Second, orders.Active)
	if _, err := f.SupportRefund(context.Background(), o.ID, "not-a-reason", "support:test"); err == nil {
		t.Fatal("a reason outside the spec's list was accepted")
	}
	row, err := f.SupportRefund(context.Background(), o.ID, "incident_credit", "support:test")
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != orders.Refunded || row.RefundedAmountSun != o.TotalAmountSun {
		t.Fatalf("refunded order %+v", row.Record)
	}
	if bal, res := e.balance(acc); bal != 100_000_000 || res != 0 {
		t.Fatalf("balance %d reserved %d", bal, res)
	}
	if _, err := f.SupportRefund(context.Background(), o.ID, "incident_credit", "support:test"); !errors.Is(err, ErrNotRefundable) {
		t.Fatalf("second refund: %v", err)
	}
	evs := e.events(o.ID)
	last := evs[len(evs)-1]
	var rd orders.RefundedData
	_ = json.Unmarshal(last.Data, &rd)
	if last.Event != orders.EventRefunded || rd.Reason != "incident_credit" || !rd.RefundComplete || rd.RefundedAmountSun != o.TotalAmountSun {
		t.Fatalf("order.refunded %s %+v", last.Event, rd)
	}
	// The money came back; the stake comes back too once the chain allows it (a
	// delegation never ends by itself).
	if _, err := e.sim.Mine(1300); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for e.delegated(to, orders.Energy) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the refunded order's delegation was never taken back")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if evs2 := e.events(o.ID); len(evs2) != len(evs) {
		t.Fatalf("taking the stake back sent events: %v", evs2[len(evs):])
	}
	e.invariants()
}

// A replica that signed and journaled a delegation and died before broadcasting it, for
// longer than the transaction's minute: the stored transaction is refused as expired, the
// network never had it, so the fill is signed again (attempt 1) instead of failing the order.
func TestDelegationSignedButNeverSentIsSignedAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.account(100)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: e.receiver(true)})
	signUnsent(t, e, o.ID)
	if _, err := e.sim.Mine(25); err != nil { // the transaction's minute passes on the chain
		t.Fatal(err)
	}
	e.startFlow()
	row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Active, orders.Failed)
	if row.Status != orders.Active {
		t.Fatalf("order %s, failure %+v", row.Status, row.Failure)
	}
	var attempts []int
	rows, _ := e.db.Pool.Query(ctx, `SELECT attempt FROM signed_txs WHERE order_id = $1 AND purpose = 'delegate' ORDER BY attempt`, o.ID)
	attempts, _ = pgx.CollectRows(rows, pgx.RowTo[int])
	if len(attempts) != 2 || e.delegated(mustAddr(t, row.Receiver), orders.Energy) == 0 {
		t.Fatalf("delegate attempts %v", attempts)
	}
	e.invariants()
}

func mustAddr(t *testing.T, s string) tron.Address {
	t.Helper()
	a, err := tron.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A delegation that was broadcast and landed but whose answer was lost (the journal still
// says signed), retried after its minute: the node refuses it as expired (java-tron checks
// expiration before duplicates), and the processor must find it on chain instead of
// signing a second delegation.
func TestExpiredRefusalOfALandedDelegationDelegatesOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	acc := e.account(100)
	to := e.receiver(true)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
	signed := signUnsent(t, e, o.ID)
	// The broadcast reaches the network, its answer does not reach us.
	if _, err := e.node.BroadcastTransaction(ctx, &signed.Tx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.Mine(25); err != nil { // in a block, and its minute is over
		t.Fatal(err)
	}
	e.startFlow()
	row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Active, orders.Failed)
	if row.Status != orders.Active || len(row.DelegateHashes) != 1 || row.DelegateHashes[0] != signed.TxID {
		t.Fatalf("order %s hashes %v, want active with %s", row.Status, row.DelegateHashes, signed.TxID)
	}
	var fillBalance int64
	if err := e.db.Pool.QueryRow(ctx, `SELECT balance_sun FROM order_fills WHERE order_id = $1`, o.ID).Scan(&fillBalance); err != nil {
		t.Fatal(err)
	}
	if d := e.delegated(to, orders.Energy); d != fillBalance {
		t.Fatalf("receiver holds %d SUN of delegation, the order's fill %d", d, fillBalance)
	}
	e.invariants()
}

// A node that loses its pending pool with the processor (the dev stack's SIGKILL: the
// simulator dies with it) never puts the broadcast delegation in a block, and no chain fact
// comes. A starting processor makes such orders due at once and sends the same signed bytes
// again, so the order is delivered within a few blocks, not after LandGrace (here 60 s) and
// a new signature; one txid, one landed delegation.
func TestAStartingProcessorSendsALostBroadcastAgain(t *testing.T) {
	e := newEnvSim(t, network.Mainnet, nil, testenv.Kafka(t), func(o *tronsim.Options) { o.BlockInterval = time.Second })
	e.landGrace = 60 * time.Second
	stop := e.startFlow()
	acc := e.account(100)
	to := e.receiver(true)
	e.control("/sim/faults", map[string]any{"kind": "drop_tx", "count": 1}, nil)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
	e.waitStatus(acc, o.ID, 20*time.Second, orders.Delegated)
	stop()
	began := time.Now()
	e.startFlow()
	e.waitStatus(acc, o.ID, 20*time.Second, orders.Active)
	t.Logf("active %s after the restart", time.Since(began).Round(time.Millisecond))
	var landed, signed int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state = 'landed'), count(*) FROM signed_txs
		WHERE order_id = $1 AND purpose = 'delegate'`, o.ID).Scan(&landed, &signed); err != nil {
		t.Fatal(err)
	}
	if landed != 1 || signed != 1 {
		t.Fatalf("%d delegations signed, %d landed: want the one signed before the restart, landed", signed, landed)
	}
	if got := e.delegated(to, orders.Energy); got <= 0 {
		t.Fatalf("nothing delegated on chain to %s", to)
	}
	e.invariants()
}

// signUnsent runs an order up to its delivery step with a processor that is not running,
// lets that step sign and journal the delegation, and drops the broadcast it returns: the
// state a replica leaves when it dies between the commit and the broadcast.
func signUnsent(t *testing.T, e *env, orderID string) orderstore.JournalEntry {
	t.Helper()
	f, err := New(Options{Pool: e.db.Pool, Node: e.node, Ledger: e.ledger, Network: e.net, Signers: e.signers(),
		LandGrace: 2 * time.Second, RetryEvery: 200 * time.Millisecond, Confirmations: 1, Now: e.clock.Now, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.RegisterPools(ctx); err != nil {
		t.Fatal(err)
	}
	// created -> (paid) -> allocating in one step
	if _, err := f.step(ctx, orderID); err != nil {
		t.Fatal(err)
	}
	var signed orderstore.JournalEntry
	err = pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
		row, err := orderstore.Lock(ctx, tx, orderID)
		if err != nil {
			return err
		}
		_, after, err := f.dispatch(ctx, tx, row, nil)
		if err != nil {
			return err
		}
		if after == nil {
			t.Fatalf("the delivery step of a %s order broadcast nothing", row.Status)
		}
		js, err := orderstore.Journal(ctx, tx, orderID)
		if err != nil || len(js) != 1 || js[0].State != orderstore.JournalSigned {
			t.Fatalf("journal %+v %v, want one signed delegation", js, err)
		}
		signed = js[0]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// Between its broadcast and its block, an order is reported delegated with its delegation's
// hash (the marks of many orders are written together, mark.go, but every order is
// marked): the journal row is broadcast, the fill broadcast, and GET /v1/orders/{id}'s
// record says delegated with delegate_hashes. Then it confirms as usual.
func TestDelegatedIsReportedWhileTheDelegationWaitsForItsBlock(t *testing.T) {
	e := newEnv(t)
	e.startFlow()
	acc := e.account(100)
	to := e.receiver(true)
	e.control("/sim/faults", map[string]any{"kind": "slow_confirm", "count": 1, "blocks": 5}, nil)
	o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to})
	row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Delegated, orders.Active)
	if row.Status != orders.Delegated {
		t.Fatalf("order went %s without being reported delegated while its delegation was held out of blocks", row.Status)
	}
	var txid, state, fillState string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT s.txid, s.state, f.state FROM signed_txs s
			JOIN order_fills f ON f.order_id = s.order_id AND f.seq = s.fill_seq WHERE s.order_id = $1 AND s.purpose = 'delegate'`,
		o.ID).Scan(&txid, &state, &fillState); err != nil {
		t.Fatal(err)
	}
	if len(row.DelegateHashes) != 1 || row.DelegateHashes[0] != txid || state != orderstore.JournalBroadcast || fillState != orderstore.FillBroadcast {
		t.Fatalf("delegated order hashes %v; journal %s %s, fill %s", row.DelegateHashes, txid, state, fillState)
	}
	row = e.waitStatus(acc, o.ID, 60*time.Second, orders.Active)
	if row.DeliveredAmount != 65_000 || len(row.DelegateHashes) != 1 || row.DelegateHashes[0] != txid {
		t.Fatalf("active order %+v", row.Record)
	}
	if evs := e.events(o.ID); len(evs) != 1 || evs[0].Event != orders.EventConfirmed {
		t.Fatalf("events %v, want one order.confirmed", evs)
	}
	e.invariants()
}
