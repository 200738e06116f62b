package acceptance

import (
	"context"
	"crypto/rand"
	"net/http/httptest"
	"testing"
	"time"

	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
)

// While the node is unreachable, a receiver seen activated before stays activated (an
// activation is permanent) although its entry expired, so its orders go on; a receiver
// seen not activated, or never seen, is unknown (5003 at acceptance), never served stale.
func TestActivationCacheKeepsKnownActivatedThroughNodeOutage(t *testing.T) {
	addr := func() tron.Address {
		var a tron.Address
		a[0] = 0x41
		_, _ = rand.Read(a[1:])
		return a
	}
	active, inactive, unseen := addr(), addr(), addr()
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile,
		Genesis: []tronsim.GenesisAccount{{Address: active, BalanceSun: 5_000_000}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	node := httptest.NewServer(sim.Handler())
	now := time.Now()
	clock := func() time.Time { return now }
	c := NewActivationCache(tron.NewClient(node.URL), time.Second, 2*time.Second, clock)
	ctx := context.Background()
	for _, w := range []struct {
		a    tron.Address
		want bool
	}{{active, true}, {inactive, false}} {
		if act, known := c.Activated(ctx, w.a); !known || act != w.want {
			t.Fatalf("node up: %s activated %v known %v, want %v", w.a, act, known, w.want)
		}
	}

	node.Close() // the node is gone: every read now fails
	now = now.Add(time.Minute)
	if act, known := c.Activated(ctx, active); !known || !act {
		t.Fatalf("node down: a receiver seen activated reads activated %v known %v", act, known)
	}
	for _, a := range []tron.Address{inactive, unseen} {
		if _, known := c.Activated(ctx, a); known {
			t.Fatalf("node down: %s read as known", a)
		}
	}
}
