package chainwatch

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"rental/infra/chainstore"
	"rental/infra/custody"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
)

// Every transaction sent from an own pool that the service did not sign is reported at the
// block it lands in (not at the confirmation depth facts wait for): a transfer signed by
// the owner, a permission change, a delegation by a stolen signer key. The service's own
// delegation (tracked with its signer journal) is not; a transfer signed with the signer
// key is refused by the node (java-tron's checkPermission: "Permission denied").
func TestForeignUseOfAPoolIsReported(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	pool, signer, recv := mustKey(t), mustKey(t), mustKey(t).Address()
	sim, err := tronsim.New(tronsim.Options{Network: testNet, Genesis: []tronsim.GenesisAccount{
		{Address: pool.Address(), BalanceSun: 1_000 * tron.SunPerTRX, StakeEnergySun: 100_000 * tron.SunPerTRX, StakeBandwidthSun: 100_000 * tron.SunPerTRX},
		{Address: recv, BalanceSun: tron.SunPerTRX}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	node := tron.NewClient(srv.URL)
	if err := sim.GrantDelegates(pool, signer.Address()); err != nil {
		t.Fatal(err)
	}

	var log bytes.Buffer
	reg := prometheus.NewRegistry()
	f := newTestFollower(t, db.Pool, NewNodeSource(node, 2), testOutbox(), func(o *Options) {
		o.Pools = []tron.Address{pool.Address()}
		o.Confirmations = 10
		o.Logger = slog.New(slog.NewTextHandler(&log, nil))
		o.Registerer = reg
	})
	if err := f.watchForeign(ctx); err != nil { // from the block before the head: the grant
		t.Fatal(err)
	}
	log.Reset()
	count := func(contract string) float64 {
		var m dto.Metric
		if err := f.foreign.counter.WithLabelValues(pool.Address().String(), contract).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}

	// The service's delegation, tracked as the processor tracks what it signs.
	ours := delegation(t, node, pool.Address(), recv, signer, 2, 100)
	if err := chainstore.Track(ctx, db.Pool, ours.TxID); err != nil {
		t.Fatal(err)
	}
	if _, err := node.BroadcastTransaction(ctx, ours); err != nil {
		t.Fatal(err)
	}
	// A stolen signer key's delegation, and the owner's transfer.
	stolen := delegation(t, node, pool.Address(), recv, signer, 2, 300)
	if _, err := node.BroadcastTransaction(ctx, stolen); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.TransferTRX(recv, 5*tron.SunPerTRX, &pool); err != nil {
		t.Fatal(err)
	}
	// A transfer signed with the signer key under the delegate permission is refused.
	tr, err := node.CreateTransaction(ctx, &tron.TransferContract{OwnerAddress: pool.Address(), ToAddress: recv, Amount: tron.SunPerTRX})
	if err != nil {
		t.Fatal(err)
	}
	raw, _, _ := tr.Decode()
	raw.PermissionID = 2
	bad, _ := tron.NewSignedTransaction(raw, true, signer)
	if _, err := node.BroadcastTransaction(ctx, bad); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("transfer under the delegate permission: %v", err)
	}
	if _, err := sim.Mine(1); err != nil {
		t.Fatal(err)
	}
	if err := f.watchForeign(ctx); err != nil {
		t.Fatal(err)
	}
	if count("DelegateResourceContract") != 1 || count("TransferContract") != 1 {
		t.Fatalf("foreign use counted: delegate %v, transfer %v\n%s", count("DelegateResourceContract"), count("TransferContract"), log.String())
	}
	if n := strings.Count(log.String(), "foreign use of a pool"); n != 2 || strings.Contains(log.String(), ours.TxID) {
		t.Fatalf("%d log lines (want 2, not the service's own %s):\n%s", n, ours.TxID, log.String())
	}

	// The owner changes the permissions: reported in its block too; a block read again is
	// not reported twice.
	if _, err := sim.Submit(custody.DelegateOnly(pool.Address(), mustKey(t).Address()), pool); err != nil {
		t.Fatal(err)
	}
	sim.Mine(1)
	f.foreign.last -= 2
	if err := f.watchForeign(ctx); err != nil {
		t.Fatal(err)
	}
	if count("AccountPermissionUpdateContract") != 2 || count("TransferContract") != 1 {
		t.Fatalf("after the permission change (the grant and this one): %s", log.String())
	}
}

func mustKey(t *testing.T) tron.PrivateKey {
	t.Helper()
	k, err := tron.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// delegation builds a delegation of trx TRX of energy from pool to recv signed by signer
// under permission id.
func delegation(t *testing.T, node *tron.Client, pool, recv tron.Address, signer tron.PrivateKey, id int32, trx int64) *tron.Transaction {
	t.Helper()
	tx, err := node.DelegateResource(context.Background(), &tron.DelegateResourceContract{OwnerAddress: pool, ReceiverAddress: recv,
		Balance: trx * tron.SunPerTRX, Resource: tron.Energy})
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := tx.Decode()
	if err != nil {
		t.Fatal(err)
	}
	raw.PermissionID = id
	signed, err := tron.NewSignedTransaction(raw, true, signer)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}
