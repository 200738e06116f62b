package orderflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/acceptance"
	"rental/infra/idempotency"
	"rental/infra/orderstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/apierr"
	"rental/schemas/network"
	"rental/schemas/orders"
	"rental/schemas/pricing"
)

// relaySnapshots sells energy for 5 m (minimum 32,000) and 1 h: a relayed call is sold
// on the shortest.
type relaySnapshots struct {
	t   testing.TB
	net network.Network
}

func (s relaySnapshots) Current() (pricing.Snapshot, bool) {
	m := pricing.Model{
		Network: s.net, Revision: 1,
		DayParts: []pricing.DayPart{{ID: "all", Label: "All day", StartMinute: 0, EndMinute: 1440, FactorBPS: 10_000}},
		Rows: []pricing.Row{
			{Resource: pricing.Energy, Tier: pricing.Tier5m, BasePrice: 6_000, MinAmount: 32_000, MaxAmount: 10_000_000, Enabled: true},
			{Resource: pricing.Energy, Tier: pricing.Tier1h, BasePrice: 9_000, MinAmount: 32_000, MaxAmount: 10_000_000, Enabled: true},
		},
		ActivationPriceSun: 1_100_000, ValidFor: time.Minute,
	}
	snap, err := pricing.Build(pricing.Inputs{Model: m, Now: time.Now(),
		Supply: pricing.Supply{Instant: map[pricing.Resource]int64{pricing.Energy: 1 << 40}}})
	if err != nil {
		s.t.Error(err)
		return snap, false
	}
	return snap, true
}

// newRelayEnv is the processor's test environment with blocks every interval (and free
// bandwidth freeNet per account, 0: the default 600), the processor running, and relay
// acceptance over relaySnapshots.
func newRelayEnv(t testing.TB, interval time.Duration, freeNet int64) (*env, *acceptance.Relays) {
	e := newEnvSim(t, network.Mainnet, nil, testenv.Kafka(t), func(o *tronsim.Options) {
		o.BlockInterval = interval
		if freeNet > 0 {
			o.Params.FreeNetLimit = freeNet
		}
	})
	e.startFlow()
	prices, err := acceptance.NewPrices(acceptance.PricesOptions{Network: e.net, Snapshots: relaySnapshots{t: t, net: e.net}, Chain: e.node,
		ActivationTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := acceptance.NewOrders(acceptance.Options{Network: e.net, Prices: prices, Ledger: e.ledger,
		Idempotency: idempotency.New(e.db.Pool, idempotency.Options{}), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	relays, err := acceptance.NewRelays(acceptance.RelaysOptions{Orders: acc, Node: e.node})
	if err != nil {
		t.Fatal(err)
	}
	return e, relays
}

// POST /v1/transactions end to end on the simulator (1 s blocks) with the real processor,
// Postgres and Kafka: a wallet holding USDT and 1 TRX but no energy signs a USDT transfer;
// it is accepted for the call's energy plus 10 % (not a round figure), lands SUCCESS with
// nothing burnt within two blocks of the delegation, the delegation is taken back
// (order.reclaimed) and the same transaction posted again is the same order. A transaction
// expiring too soon, one that reverts, one signed by another key, a TRX transfer, one of an
// owner without bandwidth or TRX, one broadcast already and a price above max_price_sun are
// refused with their codes, storing and charging nothing.
func TestRelayedTransferLandsOnDeliveredEnergyAndIsReclaimed(t *testing.T) {
	// Free bandwidth below a transfer's size: the wallet pays with staked bandwidth, an
	// owner with neither stake nor TRX is refused (2067).
	e, relays := newRelayEnv(t, time.Second, 300)
	ctx := context.Background()
	account := e.account(1_000)
	wallet, _ := tron.GenerateKey()
	to, _ := tron.GenerateKey()
	if err := e.sim.SeedAccount(tronsim.GenesisAccount{Address: wallet.Address(), BalanceSun: tron.SunPerTRX, StakeBandwidthSun: 1_000_000 * tron.SunPerTRX,
		USDT: 50_000_000}); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.SeedAccount(tronsim.GenesisAccount{Address: to.Address(), BalanceSun: tron.SunPerTRX, USDT: 1}); err != nil {
		t.Fatal(err)
	}
	transfer := func(key tron.PrivateKey, amount int64) *tron.Transaction {
		t.Helper()
		data, err := tron.TRC20TransferData(to.Address(), big.NewInt(amount))
		if err != nil {
			t.Fatal(err)
		}
		tx, err := e.node.TriggerSmartContract(ctx, &tron.TriggerSmartContract{OwnerAddress: wallet.Address(),
			ContractAddress: e.sim.USDTContract(), Data: data}, 50*tron.SunPerTRX)
		if err != nil {
			t.Fatal(err)
		}
		if err := tron.SignTransaction(tx, key); err != nil && key == wallet {
			t.Fatal(err)
		}
		return tx
	}
	post := func(tx *tron.Transaction) (acceptance.RelayAccepted, error) {
		b, _ := json.Marshal(tx)
		return relays.Accept(ctx, account, acceptance.RelayRequest{Transaction: b})
	}
	refused := func(name string, tx *tron.Transaction, want *apierr.Code) {
		t.Helper()
		bal0, res0 := e.balance(account)
		_, err := post(tx)
		var ae *apierr.Error
		if !errors.As(err, &ae) || ae.Code != want {
			t.Fatalf("%s: %v, want %d %s", name, err, want.Code, want.Slug)
		}
		if bal, res := e.balance(account); bal != bal0 || res != res0 {
			t.Fatalf("%s: refused but the ledger moved: %d/%d -> %d/%d", name, bal0, res0, bal, res)
		}
		if _, _, found, _ := orderstore.RelayOf(ctx, e.db.Pool, tx.TxID); found {
			t.Fatalf("%s: refused but stored", name)
		}
	}

	// Refused before any charge.
	refused("reverting (more USDT than the wallet holds)", transfer(wallet, 60_000_000), apierr.TransactionWouldRevert)
	other, _ := tron.GenerateKey()
	forged := transfer(wallet, 1_000_000)
	raw, _, _ := forged.Decode()
	var err error
	if forged, err = tron.NewTransaction(raw, false); err != nil {
		t.Fatal(err)
	}
	rawBytes, _ := raw.Marshal()
	sig, _ := other.SignHash(sha256Of(rawBytes))
	forged.Signature = []string{hexOf(sig)}
	refused("signed by another key", forged, apierr.TransactionSignatureInvalid)
	soon := transfer(wallet, 1_000_000)
	r, _, _ := soon.Decode()
	head, _ := e.node.GetHead(ctx)
	r.Expiration = head.Timestamp() + 10_000
	if soon, err = tron.NewSignedTransaction(r, false, wallet); err != nil {
		t.Fatal(err)
	}
	refused("expiring in 10 s", soon, apierr.TransactionExpiring)
	trx, err := tron.NewSignedTransaction(&tron.RawData{RefBlockBytes: r.RefBlockBytes, RefBlockHash: r.RefBlockHash, Expiration: r.Expiration + 50_000,
		Contract: &tron.TransferContract{OwnerAddress: wallet.Address(), ToAddress: to.Address(), Amount: 1}}, false, wallet)
	if err != nil {
		t.Fatal(err)
	}
	refused("TRX transfer", trx, apierr.TransactionNotContractCall)
	poor, _ := tron.GenerateKey()
	if err := e.sim.SeedAccount(tronsim.GenesisAccount{Address: poor.Address(), BalanceSun: 1, USDT: 50_000_000}); err != nil {
		t.Fatal(err)
	}
	pdata, _ := tron.TRC20TransferData(to.Address(), big.NewInt(1))
	ptx, err := e.node.TriggerSmartContract(ctx, &tron.TriggerSmartContract{OwnerAddress: poor.Address(),
		ContractAddress: e.sim.USDTContract(), Data: pdata}, 50*tron.SunPerTRX)
	if err != nil {
		t.Fatal(err)
	}
	if err := tron.SignTransaction(ptx, poor); err != nil {
		t.Fatal(err)
	}
	refused("no bandwidth and no TRX", ptx, apierr.TransactionLacksBandwidth)
	// Another wallet broadcasts its own transfer itself (it burns TRX for it), then posts it.
	self, _ := tron.GenerateKey()
	if err := e.sim.SeedAccount(tronsim.GenesisAccount{Address: self.Address(), BalanceSun: 100 * tron.SunPerTRX, USDT: 50_000_000}); err != nil {
		t.Fatal(err)
	}
	sent, err := e.node.TriggerSmartContract(ctx, &tron.TriggerSmartContract{OwnerAddress: self.Address(),
		ContractAddress: e.sim.USDTContract(), Data: pdata}, 50*tron.SunPerTRX)
	if err != nil {
		t.Fatal(err)
	}
	if err := tron.SignTransaction(sent, self); err != nil {
		t.Fatal(err)
	}
	if _, err := e.node.BroadcastTransaction(ctx, sent); err != nil {
		t.Fatal(err)
	}
	refused("broadcast already (pending or in a block)", sent, apierr.TransactionAlreadyBroadcast)

	// The transfer: first with a price cap below its total (3006, nothing stored, so the
	// same transaction is accepted afterwards).
	tx := transfer(wallet, 1_000_000)
	bal0, _ := e.balance(account)
	b, _ := json.Marshal(tx)
	capped := int64(1)
	var ae *apierr.Error
	if _, err := relays.Accept(ctx, account, acceptance.RelayRequest{Transaction: b, MaxPriceSun: &capped}); !errors.As(err, &ae) || ae.Code != apierr.PriceAboveLimit {
		t.Fatalf("max_price_sun 1: %v, want 3006", err)
	}
	if bal, res := e.balance(account); bal != bal0 || res != 0 {
		t.Fatalf("a refused price moved the ledger: %d/%d", bal, res)
	}
	first, err := post(tx)
	if err != nil || first.Replayed {
		t.Fatalf("relay: %v (replayed %v)", err, first.Replayed)
	}
	posted, _ := e.node.GetHead(ctx)
	var rec orders.Record
	if err := json.Unmarshal(first.Body, &rec); err != nil {
		t.Fatal(err)
	}
	want := int64(tronsim.EnergyUSDTTransferToHolder*11_000+9_999) / 10_000 // the call's energy + 10 %, rounded up to a unit
	if rec.Amount != want || rec.Resource != orders.Energy || rec.Tier == nil || *rec.Tier != string(pricing.Tier5m) || rec.Receiver != wallet.Address().String() {
		t.Fatalf("order %+v: want %d energy for 5m to the wallet", rec, want)
	}
	if rec.Transaction == nil || rec.Transaction.TxID != tx.TxID || rec.Transaction.Status != orders.TxWaiting {
		t.Fatalf("order's transaction %+v", rec.Transaction)
	}
	again, err := post(tx)
	var rec2 orders.Record
	if err != nil || !again.Replayed || json.Unmarshal(again.Body, &rec2) != nil || rec2.ID != rec.ID {
		t.Fatalf("repeat: %v replayed %v id %s, want order %s", err, again.Replayed, rec2.ID, rec.ID)
	}

	// Another account posting it: 2065, nothing charged to it.
	stranger := e.account(1_000)
	sbal, _ := e.balance(stranger)
	var se *apierr.Error
	if _, err := relays.Accept(ctx, stranger, acceptance.RelayRequest{Transaction: b}); !errors.As(err, &se) || se.Code != apierr.TransactionAlreadyBroadcast {
		t.Fatalf("another account posting the transaction: %v, want 2065", err)
	}
	if bal, res := e.balance(stranger); bal != sbal || res != 0 {
		t.Fatalf("the other account was charged: %d/%d", bal, res)
	}

	// It lands within two blocks of the delegation's, with nothing burnt.
	var ran orderstore.Row
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ran, err = orderstore.Get(ctx, e.db.Pool, account, rec.ID); err != nil {
			t.Fatal(err)
		}
		if ran.Transaction != nil && ran.Transaction.Status.Ran() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transaction did not run: order %s, transaction %+v", ran.Status, ran.Transaction)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := ran.Transaction
	if got.Status != orders.TxConfirmed || *got.Result != "SUCCESS" || *got.EnergyFeeSun != 0 || *got.EnergyUsed != int64(tronsim.EnergyUSDTTransferToHolder) {
		t.Fatalf("ran %+v (result %v, fee %v, used %v)", got, *got.Result, *got.EnergyFeeSun, *got.EnergyUsed)
	}
	if *got.Block > posted.Number()+3 {
		t.Fatalf("landed in block %d, posted at head %d: more than the delegation's block and two more", *got.Block, posted.Number())
	}
	acct, err := e.node.GetAccount(ctx, wallet.Address())
	if err != nil || acct.Balance != tron.SunPerTRX {
		t.Fatalf("wallet TRX %d (%v): something was burnt", acct.Balance, err)
	}

	// The delegation comes back; the charge is the order's total, charged once.
	done := e.waitStatus(account, rec.ID, 30*time.Second, orders.Reclaimed)
	if n := e.delegated(wallet.Address(), orders.Energy); n != 0 {
		t.Fatalf("still %d SUN delegated to the wallet after the reclaim", n)
	}
	if done.Transaction == nil || done.Transaction.Status != orders.TxConfirmed {
		t.Fatalf("reclaimed order's transaction %+v", done.Transaction)
	}
	if bal, res := e.balance(account); bal0-bal != rec.TotalAmountSun || res != 0 {
		t.Fatalf("charged %d (reserved %d), want the order's total %d", bal0-bal, res, rec.TotalAmountSun)
	}
	if _, err := post(tx); err != nil {
		t.Fatalf("repeat after it ran: %v", err)
	}
	if bal, _ := e.balance(account); bal0-bal != rec.TotalAmountSun {
		t.Fatalf("a repeat charged again: %d", bal0-bal)
	}
	e.invariants()
}

func sha256Of(b []byte) []byte { h := sha256.Sum256(b); return h[:] }

func hexOf(b []byte) string { return hex.EncodeToString(b) }
