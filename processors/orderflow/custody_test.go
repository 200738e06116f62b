package orderflow

import (
	"context"
	"testing"
	"time"

	"rental/infra/custody"
	"rental/infra/testenv/chainstack"
	"rental/infra/tron"
	"rental/schemas/orders"
)

// Delegations land signed by the signer key under the pool's delegate permission
// (Permission_id 2, never the owner's 0); a pool whose permission is removed leaves
// allocation at the next check while orders keep flowing from the other, and comes back
// when the permission is granted again.
func TestDelegationsUnderTheDelegatePermissionAndARevokedPoolLeaves(t *testing.T) {
	e := newEnv(t, 10_000_000, 10_000_000)
	f := e.startFlowReturning()
	ctx := context.Background()
	acc := e.account(100)
	owners := map[string]tron.PrivateKey{}
	for _, k := range e.pools {
		owners[k.Address().String()] = k
	}
	fillPool := func(orderID string) string {
		t.Helper()
		var p string
		if err := e.db.Pool.QueryRow(ctx, `SELECT pool_address FROM order_fills WHERE order_id = $1 AND source = 'pool'`, orderID).Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deliver := func() (string, string) {
		t.Helper()
		o := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "5m", receiver: e.receiver(true)})
		row := e.waitStatus(acc, o.ID, 20*time.Second, orders.Active)
		return fillPool(o.ID), row.DelegateHashes[0]
	}

	first, hash := deliver()
	tx, err := e.node.GetTransactionByID(ctx, hash)
	if err != nil {
		t.Fatal(err)
	}
	raw, _, err := tx.Decode()
	if err != nil {
		t.Fatal(err)
	}
	signers, err := tron.VerifyTransaction(tx)
	if err != nil {
		t.Fatal(err)
	}
	if raw.PermissionID < 2 || len(signers) != 1 || signers[0] != chainstack.SignerKey().Address() || signers[0].String() == first {
		t.Fatalf("delegation under Permission_id %d signed by %v (pool %s)", raw.PermissionID, signers, first)
	}

	// The owner replaces the permission by one without the signer.
	other, err := tron.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pool := owners[first]
	if _, err := e.sim.Submit(custody.DelegateOnly(pool.Address(), other.Address()), pool); err != nil {
		t.Fatal(err)
	}
	e.sim.Mine(1)
	f.o.Signers.Check(ctx)
	if _, ok := f.o.Signers.Problems()[pool.Address()]; !ok {
		t.Fatal("the revoked pool still counts as usable")
	}
	for range 2 {
		if p, _ := deliver(); p == first {
			t.Fatalf("an order drew from the revoked pool %s", first)
		}
	}

	if err := e.sim.GrantDelegates(pool, chainstack.SignerKey().Address()); err != nil {
		t.Fatal(err)
	}
	f.o.Signers.Check(ctx)
	if p, _ := deliver(); p != first {
		t.Fatalf("after the grant an order drew from %s, want the pool %s back (first in address order)", p, first)
	}
}
