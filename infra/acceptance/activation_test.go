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
	_, node := nodeWithAccount(t, active)
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

// countingReader counts the reads that reach the node.
type countingReader struct {
	AccountReader
	n int
}

func (c *countingReader) GetAccount(ctx context.Context, addr tron.Address) (*tron.Account, error) {
	c.n++
	return c.AccountReader.GetAccount(ctx, addr)
}

// A receiver seen activated is not read again for ten minutes (java-tron never deletes an
// account); one seen not activated is read again once its TTL is over, and so sees its
// activation.
func TestActivationCacheKeepsActivatedLongerThanNotActivated(t *testing.T) {
	var active, later tron.Address
	active[0], later[0] = 0x41, 0x41
	_, _ = rand.Read(active[1:])
	_, _ = rand.Read(later[1:])
	sim, node := nodeWithAccount(t, active)
	t.Cleanup(node.Close)
	now := time.Now()
	reads := &countingReader{AccountReader: tron.NewClient(node.URL)}
	c := NewActivationCache(reads, 5*time.Second, 2*time.Second, func() time.Time { return now })
	ctx := context.Background()
	ask := func(a tron.Address, want bool, wantReads int) {
		t.Helper()
		if act, known := c.Activated(ctx, a); !known || act != want {
			t.Fatalf("%s: activated %v known %v, want %v", a, act, known, want)
		}
		if reads.n != wantReads {
			t.Fatalf("%s: %d node reads so far, want %d", a, reads.n, wantReads)
		}
	}
	ask(active, true, 1)
	ask(later, false, 2)
	now = now.Add(9 * time.Minute)
	ask(active, true, 2) // still cached
	if _, err := sim.TransferTRX(later, 1_000_000, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Mine(1); err != nil {
		t.Fatal(err)
	}
	ask(later, true, 3) // not activated was stale after 5 s: read again, now activated
	now = now.Add(2 * time.Minute)
	ask(active, true, 4) // 11 minutes after its read: read again
}

// nodeWithAccount is a simulated node over HTTP on which active is an activated account.
func nodeWithAccount(t *testing.T, active tron.Address) (*tronsim.Sim, *httptest.Server) {
	t.Helper()
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile,
		Genesis: []tronsim.GenesisAccount{{Address: active, BalanceSun: 5_000_000}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim, httptest.NewServer(sim.Handler())
}
