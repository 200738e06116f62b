package orderflow

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/chainstore"
)

// The processor refuses to start against a node of another chain than the one the chain
// follower stored with its cursor (a fresh simulator under an old database, a mainnet node
// under NETWORK=nile), and starts against the right one.
func TestProcessorRefusesANodeOfAnotherChain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f, err := New(Options{Pool: e.db.Pool, Node: e.node, Ledger: e.ledger, Network: e.net, Signers: e.signers(),
		Logger: quiet(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, ok, err := chainstore.StoredIdentity(ctx, e.db.Pool)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the chain follower stored no chain identity")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.CheckChain(ctx); err != nil {
		t.Fatalf("the follower's own node refused: %v", err)
	}

	if _, err := e.db.Pool.Exec(ctx, `UPDATE chain_cursor SET genesis_id = $1`, "0000000000000000000000000000000000000000000000000000000000000001"); err != nil {
		t.Fatal(err)
	}
	var idErr *chainstore.IdentityError
	if err := f.CheckChain(ctx); !errors.As(err, &idErr) {
		t.Fatalf("another chain's node: %v, want an IdentityError", err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.Run(runCtx, RunOptions{Brokers: []string{e.brokers}}); !errors.As(err, &idErr) {
		t.Fatalf("Run against another chain's node: %v, want it refused with an IdentityError", err)
	}
}
