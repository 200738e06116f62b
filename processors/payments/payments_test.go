package payments_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/acceptance"
	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/paystore"
	"rental/infra/stages/paystage"
	"rental/infra/sweep"
	"rental/infra/testenv"
	"rental/infra/testenv/chainstack"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/processors/orderflow"
	"rental/processors/payments"
	"rental/schemas/network"
	paying "rental/schemas/payments"
	"rental/schemas/pricing"
)

// The pay-by-transfer tests run the real pieces: Postgres, the kfake broker over TCP, the
// outbox relay, the chain follower, the order processor and the node simulator over HTTP
// with fast blocks. Wallets sign transfers the way a wallet does (the node builds the
// transfer, the memo is set in raw_data.data, the wallet signs and broadcasts).

const seed = "72656e74616c2d7061792d62792d7472616e736665722d74657374732d6f6e6c79" // test-only HD seed

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// liveSnapshots prices 1 h energy at 60.00 SUN (min 10,000), activation 1.1 TRX.
type liveSnapshots struct{ t testing.TB }

func (l liveSnapshots) Current() (pricing.Snapshot, bool) {
	s, err := pricing.Build(pricing.Inputs{Model: pricing.Model{
		Network: network.Mainnet, Revision: 1,
		DayParts: []pricing.DayPart{{ID: "all", Label: "All day", StartMinute: 0, EndMinute: 1440, FactorBPS: 10_000}},
		Rows: []pricing.Row{
			{Resource: pricing.Energy, Tier: pricing.Tier1h, BasePrice: 6_000, MinAmount: 10_000, MaxAmount: 5_000_000, Enabled: true},
			{Resource: pricing.Bandwidth, Tier: pricing.Tier1h, BasePrice: 80_000, MinAmount: 1_000, MaxAmount: 100_000, Enabled: true},
		},
		ActivationPriceSun: 1_100_000, ValidFor: time.Minute,
	}, Now: time.Now(), Supply: pricing.Supply{Instant: map[pricing.Resource]int64{pricing.Energy: 50_000_000, pricing.Bandwidth: 1_000_000}}})
	if err != nil {
		l.t.Error(err)
		return s, false
	}
	return s, true
}

type env struct {
	t       testing.TB
	db      *testenv.DB
	chain   *chainstack.Chain
	store   *paystore.Store
	ledger  *ledgerstore.Ledger
	account string
	addrs   map[string]tron.Address // row key -> payment address
}

// newEnv starts everything with blocks every 100 ms; simOpts change the simulator's options.
func newEnv(t testing.TB, simOpts ...func(*tronsim.Options)) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{t: t, db: testenv.Postgres(t), addrs: map[string]tron.Address{}}
	brokers := testenv.Kafka(t)
	ps := sha256.Sum256([]byte("payments test pool"))
	pool := tron.PrivateKeyFromBytes(ps[:])
	e.chain = chainstack.Start(t, e.db.Pool, brokers, network.Mainnet, []tronsim.GenesisAccount{{Address: pool.Address(),
		BalanceSun: 1_000 * tron.SunPerTRX, StakeEnergySun: 10_000_000 * tron.SunPerTRX, StakeBandwidthSun: 10_000_000 * tron.SunPerTRX},
		chainstack.SignerAccount()}, simOpts...)
	var err error
	if e.ledger, err = ledgerstore.New(e.db.Pool, ledgerstore.Options{Network: network.Mainnet}); err != nil {
		t.Fatal(err)
	}
	prices, err := acceptance.NewPrices(acceptance.PricesOptions{Network: network.Mainnet, Snapshots: liveSnapshots{t}, Chain: e.chain.Node})
	if err != nil {
		t.Fatal(err)
	}
	orders, err := acceptance.NewOrders(acceptance.Options{Network: network.Mainnet, Prices: prices, Ledger: e.ledger,
		Idempotency: idempotency.New(e.db.Pool, idempotency.Options{}), OwnAddresses: []tron.Address{pool.Address()}, MaxInFlight: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := paystage.Addresses(seed)
	if err != nil {
		t.Fatal(err)
	}
	for a, x := range addrs {
		e.addrs[x.RowKey] = a
	}
	if e.account, err = paystage.TransferAccount(ctx, e.db.Pool, e.ledger, network.Mainnet); err != nil {
		t.Fatal(err)
	}
	e.store = paystore.New(e.db.Pool, network.Mainnet)
	flow, err := orderflow.New(orderflow.Options{Pool: e.db.Pool, Node: e.chain.Node, Ledger: e.ledger, Network: network.Mainnet,
		Signers: chainstack.GrantSigner(t, e.chain.Sim, e.chain.Node, pool), LandGrace: 2 * time.Second, RetryEvery: 200 * time.Millisecond, Confirmations: 1,
		Logger: quiet(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	proc, err := payments.New(payments.Options{Store: e.store, Ledger: e.ledger, Placer: orders, Prices: prices, Node: e.chain.Node,
		Addresses: addrs, AccountID: e.account, Tokens: []tron.Address{e.chain.Sim.USDTContract()}, Rules: paying.Rules{MaxSun: 1_000 * tron.SunPerTRX, DustSun: 100_000},
		Confirmations: 1, Start: 0, PollEvery: 50 * time.Millisecond, Logger: quiet(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() {
		done <- flow.Run(runCtx, orderflow.RunOptions{Brokers: []string{brokers}, SweepEvery: 50 * time.Millisecond})
	}()
	go func() { done <- proc.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("stage: %v", err)
			}
		}
		vs, err := ledgerstore.CheckPool(context.Background(), e.db.Pool, ledgerstore.CheckOptions{})
		if err != nil {
			t.Error(err)
		}
		for _, v := range vs {
			t.Errorf("ledger invariant: %s", v)
		}
		e.checkPayments()
	})
	return e
}

// wallet is a fresh key funded by the simulator's faucet.
func (e *env) wallet(sun int64) tron.PrivateKey {
	e.t.Helper()
	k, err := tron.GenerateKey()
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.chain.Sim.TransferTRX(k.Address(), sun, nil); err != nil {
		e.t.Fatal(err)
	}
	e.until("the wallet is funded", func() bool { a, ok := e.chain.Sim.Account(k.Address()); return ok && a.BalanceSun == sun })
	return k
}

// send builds a TRX transfer on the node, sets the memo, signs and broadcasts it.
func (e *env) send(from tron.PrivateKey, to tron.Address, sun int64, memo string) *tron.Transaction {
	e.t.Helper()
	ctx := context.Background()
	built, err := e.chain.Node.CreateTransaction(ctx, &tron.TransferContract{OwnerAddress: from.Address(), ToAddress: to, Amount: sun})
	if err != nil {
		e.t.Fatal(err)
	}
	raw, _, err := built.Decode()
	if err != nil {
		e.t.Fatal(err)
	}
	if memo != "" {
		raw.Data = []byte(memo)
	}
	tx, err := tron.NewSignedTransaction(raw, false, from)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.chain.Node.BroadcastTransaction(ctx, tx); err != nil {
		e.t.Fatal(err)
	}
	return tx
}

func (e *env) until(what string, ok func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) payment(txid, status string) paystore.View {
	e.t.Helper()
	var v paystore.View
	e.until(fmt.Sprintf("payment %s is %s", txid, status), func() bool {
		var err error
		v, err = e.store.Look(context.Background(), txid)
		if err != nil && !errors.Is(err, paystore.ErrNotFound) {
			e.t.Fatal(err)
		}
		return err == nil && paying.PublicStatus(v.Status) == status
	})
	return v
}

// checkPayments: every settled payment's money is accounted for: received = what its order
// spent + kept + refunded.
func (e *env) checkPayments() {
	rows, err := e.db.Pool.Query(context.Background(), `SELECT p.txid, p.amount_sun, p.kept_sun, p.refund_sun,
		coalesce(o.charged_amount_sun - o.refunded_amount_sun, 0)
		FROM payments p LEFT JOIN orders o ON o.id = p.order_id
		WHERE (p.settled OR p.status IN ('refunded', 'refunding', 'kept')) AND p.status <> 'reverted'`)
	if err != nil {
		e.t.Error(err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var txid string
		var amount, kept, refund, spent int64
		if err := rows.Scan(&txid, &amount, &kept, &refund, &spent); err != nil {
			e.t.Error(err)
			return
		}
		if amount != kept+refund+spent {
			e.t.Errorf("payment %s: received %d != spent %d + kept %d + refunded %d", txid, amount, spent, kept, refund)
		}
	}
}

func TestPayByTransfer(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	energy1h := e.addrs["energy_1h"]

	// A fresh wallet pays 1 TRX: the largest amount at 60 SUN is 16,666 units (999,960 SUN),
	// 40 SUN are the rest of a unit, kept.
	w := e.wallet(100 * tron.SunPerTRX)
	tx := e.send(w, energy1h, 1_000_000, "")
	start := time.Now()
	v := e.payment(tx.TxID, paying.StatusDelivered)
	if v.OrderAmount == nil || *v.OrderAmount != 16_666 || *v.PriceSun != 999_960 || v.KeptSun != 40 || v.Receiver != w.Address().String() ||
		len(v.DelegateHashes) == 0 || v.RowKey != "energy_1h" {
		t.Fatalf("payment %+v", v)
	}
	e.until("the sender has the energy", func() bool {
		r, err := e.chain.Node.GetAccountResource(ctx, w.Address())
		return err == nil && r.EnergyLimit >= 16_666
	})
	t.Logf("transfer to energy: %s (blocks every 100 ms)", time.Since(start))

	// The same transfer broadcast again is the same transaction: refused as a duplicate,
	// served once.
	if _, err := e.chain.Node.BroadcastTransaction(ctx, tx); err == nil {
		t.Fatal("a second broadcast of the same transaction was accepted")
	}

	// A memo names the receiver.
	r := e.wallet(1 * tron.SunPerTRX)
	memo := e.send(w, energy1h, 2_000_000, r.Address().String())
	mv := e.payment(memo.TxID, paying.StatusDelivered)
	if mv.Receiver != r.Address().String() || *mv.OrderAmount != 33_333 {
		t.Fatalf("memo payment %+v", mv)
	}
	e.until("the memo's address has the energy", func() bool {
		res, err := e.chain.Node.GetAccountResource(ctx, r.Address())
		return err == nil && res.EnergyLimit >= 33_333
	})

	// Below the minimum (10,000 x 60 = 600,000 SUN): the transfer comes back.
	s := e.wallet(10 * tron.SunPerTRX)
	small := e.send(s, energy1h, 500_000, "")
	sv := e.payment(small.TxID, paying.StatusRefunded)
	if sv.RefundSun != 500_000 || sv.RefundTxID == nil || sv.Reason == nil || *sv.Reason != paying.ReasonBelowMinimum {
		t.Fatalf("refund %+v", sv)
	}
	e.until("the refund landed", func() bool {
		p, err := e.store.Get(ctx, small.TxID)
		return err == nil && p.Status == paying.StoredRefunded
	})
	if a, _ := e.chain.Sim.Account(s.Address()); a.BalanceSun != 10*tron.SunPerTRX {
		t.Fatalf("the sender has %d SUN after the refund, want all 10 TRX back (free bandwidth pays the fees)", a.BalanceSun)
	}

	// A replay of the chain (the follower's cursor lost) records nothing twice and places no
	// second order.
	if _, err := e.db.Pool.Exec(ctx, `DELETE FROM payment_cursor; DELETE FROM payment_blocks`); err != nil {
		t.Fatal(err)
	}
	e.until("the follower read the chain again", func() bool {
		c, ok, err := e.store.LoadCursor(ctx)
		return err == nil && ok && c.Num >= sv.BlockNum
	})
	var orders, refunds int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE account_id = $1`, e.account).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_postings WHERE kind = 'payment_refund'`).Scan(&refunds); err != nil {
		t.Fatal(err)
	}
	if orders != 2 || refunds != 1 {
		t.Fatalf("after a replay: %d orders, %d refunds; want 2 and 1", orders, refunds)
	}

	// USDT sent to a payment address is no order: recorded and held for support.
	usdt, err := e.chain.Sim.TransferUSDT(energy1h, 7_000_000, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	uv := e.payment(usdt, paying.StatusFailed)
	if uv.Asset != "USDT" || uv.AmountSun != 7_000_000 || uv.Status != paying.StoredHeld || uv.OrderID != nil ||
		uv.Reason == nil || *uv.Reason != paying.ReasonToken {
		t.Fatalf("USDT payment %+v", uv)
	}

	// The payment address is swept to the treasury of what no payment needs any more.
	e.until("every TRX payment is settled or refunded", func() bool {
		var open int
		err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE asset = 'TRX' AND NOT settled AND status <> 'refunded'`).Scan(&open)
		return err == nil && open == 0
	})
	keys, err := sweep.NewKeys(seed)
	if err != nil {
		t.Fatal(err)
	}
	treasury := e.wallet(tron.SunPerTRX) // an existing account, as a treasury is
	sw, err := sweep.New(sweep.Options{Pool: e.db.Pool, Node: e.chain.Node, Keys: keys, Treasury: treasury.Address(),
		USDTContract: e.chain.Sim.USDTContract()})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := e.chain.Sim.Account(energy1h)
	// A run skips the addresses while the follower trails the head (a block every 100 ms
	// here), so a few runs may be needed.
	e.until("a sweep is signed", func() bool {
		rep, err := sw.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Signed["trx"] == 1
	})
	e.until("the treasury has the payments' money", func() bool {
		a, ok := e.chain.Sim.Account(treasury.Address())
		return ok && a.BalanceSun == tron.SunPerTRX+before.BalanceSun-500_000
	})

	// An unknown transaction id is not found.
	if _, err := e.store.Look(ctx, "00"+tx.TxID[2:]); !errors.Is(err, paystore.ErrNotFound) {
		t.Fatalf("unknown txid: %v", err)
	}
}

// A fork that moves the transfer to another block changes nothing: one order. A transfer a
// fork removed for good (it can no longer be included: its expiration passed) after its
// energy was delegated is reclaimed at once and its money taken back out of the transfer
// account; the ledger still balances.
func TestForkAfterDelivery(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w := e.wallet(100 * tron.SunPerTRX)
	tx := e.send(w, e.addrs["energy_1h"], 1_000_000, "")
	v := e.payment(tx.TxID, paying.StatusDelivered)
	head := e.chain.Sim.Head()
	if _, err := e.chain.Sim.Fork(int(head.Number - v.BlockNum + 1)); err != nil {
		t.Fatal(err)
	}
	e.until("the transfer is recorded in its new block", func() bool {
		p, err := e.store.Get(ctx, tx.TxID)
		return err == nil && p.BlockNum > v.BlockNum && p.OrphanedAt == nil
	})
	var n int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE client_order_id = $1`, tx.TxID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d orders after the fork (%v)", n, err)
	}
	if p, _ := e.store.Get(ctx, tx.TxID); p.Status == paying.StoredReverted {
		t.Fatal("a transfer the fork re-included was reverted")
	}

	// What a fork that dropped the transfer leaves: its block gone, its expiration past.
	if _, err := e.db.Pool.Exec(ctx, `UPDATE payments SET orphaned_at = now(), tx_expires = now() - interval '1 hour' WHERE txid = $1`, tx.TxID); err != nil {
		t.Fatal(err)
	}
	e.payment(tx.TxID, paying.StatusFailed)
	p, _ := e.store.Get(ctx, tx.TxID)
	if p.Status != paying.StoredReverted || p.Reason == nil || *p.Reason != paying.ReasonReclaimedByFork {
		t.Fatalf("payment %+v", p)
	}
	var reclaim *time.Time
	if err := e.db.Pool.QueryRow(ctx, `SELECT reclaim_requested_at FROM orders WHERE id = $1`, *p.OrderID).Scan(&reclaim); err != nil || reclaim == nil {
		t.Fatalf("the order was not reclaimed: %v %v", reclaim, err)
	}
	e.until("the delegation is taken back", func() bool {
		r, err := e.chain.Node.GetAccountResource(ctx, w.Address())
		return err == nil && r.EnergyLimit == 0
	})
}

// The node's clock is the chain's (its head block's time), not this machine's: a chain
// whose time trails the wall clock (a dev chain stopped and restarted) still gets its
// refunds signed and sent, as on a real node.
func TestRefundOnAChainBehindTheClock(t *testing.T) {
	e := newEnv(t, func(o *tronsim.Options) { o.GenesisTime = time.Now().Add(-2 * time.Hour) })
	w := e.wallet(10 * tron.SunPerTRX)
	tx := e.send(w, e.addrs["energy_1h"], 500_000, "")
	e.payment(tx.TxID, paying.StatusRefunded)
	e.until("the refund landed", func() bool {
		p, err := e.store.Get(context.Background(), tx.TxID)
		return err == nil && p.Status == paying.StoredRefunded
	})
}

// A refund the node accepts and then loses (the simulator's drop_tx, a node restarted with
// an empty pending pool) is sent again, the same bytes, until it lands: the sender is paid,
// once.
func TestALostRefundIsSentAgain(t *testing.T) {
	e := newEnv(t)
	w := e.wallet(10 * tron.SunPerTRX)
	tx := e.send(w, e.addrs["energy_1h"], 500_000, "") // below the row's minimum: refunded
	// The transfer is in the node's pending pool; the next broadcast is the refund's.
	if _, err := e.chain.Sim.InjectFault(tronsim.FaultDropTx, 1, 0); err != nil {
		t.Fatal(err)
	}
	e.until("the refund landed", func() bool {
		p, err := e.store.Get(context.Background(), tx.TxID)
		return err == nil && p.Status == paying.StoredRefunded
	})
	var refunds int
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM ledger_postings WHERE kind = 'payment_refund' AND ref = 'payment_refund:' || $1`,
		tx.TxID).Scan(&refunds); err != nil || refunds != 1 {
		t.Fatalf("%d refund postings (%v), want 1", refunds, err)
	}
}
