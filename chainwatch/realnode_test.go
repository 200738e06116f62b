package chainwatch

import (
	"context"
	"errors"
	"math/big"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"rental/infra/chainstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
)

// simAt starts a simulator with its own genesis time (so its own genesis block id) and
// solidified lag.
func simAt(t *testing.T, genesis time.Time, solidLag int64) *simNode {
	t.Helper()
	sim, err := tronsim.New(tronsim.Options{Network: testNet, GenesisTime: genesis, SolidLag: solidLag})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	return &simNode{t: t, url: srv.URL, client: tron.NewClient(srv.URL), usdt: sim.USDTContract()}
}

func problem(t *testing.T, f *Follower) string {
	t.Helper()
	var p *string
	if err := f.o.Pool.QueryRow(context.Background(), `SELECT problem FROM chain_cursor WHERE name = 'chainwatch'`).Scan(&p); err != nil {
		t.Fatal(err)
	}
	if p == nil {
		return ""
	}
	return *p
}

// The chain's identity (genesis block id, network) is stored with the cursor at first
// start; a node of another chain (here: a fresh simulator under the old database) is
// refused with an error naming the way out, reads nothing, and is reported.
func TestFollowerRefusesANodeOfAnotherChain(t *testing.T) {
	db := testenv.Postgres(t)
	a := simAt(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 1)
	a.mine(3)
	fa := newTestFollower(t, db.Pool, a.source(), testOutbox(), func(o *Options) { o.Tokens = []tron.Address{a.usdt} })
	catchUp(t, fa)
	at, _, _ := storedCursor(t, db.Pool)

	b := simAt(t, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), 1)
	b.mine(10)
	fb := newTestFollower(t, db.Pool, b.source(), testOutbox(), func(o *Options) { o.Tokens = []tron.Address{b.usdt} })
	_, err := fb.poll(context.Background())
	var ie *chainstore.IdentityError
	if !errors.As(err, &ie) {
		t.Fatalf("poll against another chain: %v, want an IdentityError", err)
	}
	wantContains(t, err.Error(), "make reset")
	if n, _, _ := storedCursor(t, db.Pool); n != at {
		t.Fatalf("cursor moved to %d on another chain's blocks", n)
	}
	if p := problem(t, fb); p == "" {
		t.Fatal("the refusal is not recorded for GET /v1/status")
	}
	if v := gauge(fb.m.nodeProblem); v != 1 {
		t.Fatalf("rental_chainwatch_node_problem = %v, want 1", v)
	}
	// The right node again: followed, the problem cleared.
	a.mine(2)
	fa2 := newTestFollower(t, db.Pool, a.source(), testOutbox(), func(o *Options) { o.Tokens = []tron.Address{a.usdt} })
	catchUp(t, fa2)
	if p := problem(t, fa2); p != "" {
		t.Fatalf("problem after following the right chain again: %q", p)
	}
}

// A stored cursor above the node's head is reported (error, stored problem, metric)
// instead of being waited on silently; the follower carries on once the head passes it.
func TestCursorAboveTheHeadIsReported(t *testing.T) {
	db := testenv.Postgres(t)
	c := newMemChain()
	c.mine(8)
	f := newTestFollower(t, db.Pool, c, testOutbox(), nil)
	catchUp(t, f)

	short := newMemChain() // the same chain, 5 blocks behind
	short.mine(3)
	f2 := newTestFollower(t, db.Pool, short, testOutbox(), nil)
	if _, err := f2.poll(context.Background()); !errors.Is(err, ErrCursorAboveHead) {
		t.Fatalf("poll with the cursor above the head: %v", err)
	}
	if p := problem(t, f2); p == "" || gauge(f2.m.nodeProblem) != 1 {
		t.Fatalf("not reported: problem %q, metric %v", p, gauge(f2.m.nodeProblem))
	}
	short.mine(7)
	catchUp(t, f2)
	if n, _, _ := storedCursor(t, db.Pool); n != 10 || problem(t, f2) != "" || gauge(f2.m.nodeProblem) != 0 {
		t.Fatalf("after the head passed the cursor: cursor %d, problem %q", n, problem(t, f2))
	}
}

// gettransactioninfobyblocknum answers an empty list when the node lacks the block's
// history; a block whose contract calls have no info record is read again, not skipped
// (a TRC-20 deposit in it would be lost).
func TestBlockWithMissingTransactionInfosIsReadAgain(t *testing.T) {
	db := testenv.Postgres(t)
	c := newMemChain()
	c.trc20(alice, usdt, false, transferLog(usdt, alice, bob, bigInt(5)))
	c.mine(1)
	id := c.blocks[1].ID
	infos := c.infos[id]
	c.mu.Lock()
	c.infos[id] = nil
	c.mu.Unlock()

	f := newTestFollower(t, db.Pool, c, testOutbox(), nil)
	if _, err := f.poll(context.Background()); !errors.Is(err, errIncomplete) {
		t.Fatalf("poll with the infos missing: %v, want errIncomplete", err)
	}
	if got := emitted(t, db.Pool); len(got) != 0 {
		t.Fatalf("facts emitted from an incomplete block: %+v", got)
	}
	c.mu.Lock()
	c.infos[id] = infos
	c.mu.Unlock()
	catchUp(t, f)
	if got := emitted(t, db.Pool); len(got) != 1 || got[0].Amount != "5" {
		t.Fatalf("after the infos came: %+v", got)
	}
}

// Nothing above the node's solidified block (/walletsolidity/getblock) is read, whatever
// the confirmation depth.
func TestNothingAboveTheSolidifiedBlockIsRead(t *testing.T) {
	db := testenv.Postgres(t)
	s := simAt(t, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 4)
	head := s.mine(10)
	f := newTestFollower(t, db.Pool, s.source(), testOutbox(), func(o *Options) {
		o.Tokens = []tron.Address{s.usdt}
		o.Solidified = true
	})
	catchUp(t, f)
	if n, _, _ := storedCursor(t, db.Pool); n != head-4 {
		t.Fatalf("cursor %d, want the solidified block %d", n, head-4)
	}
}

func wantContains(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("%q does not contain %q", got, want)
	}
}

func bigInt(n int64) *big.Int { return big.NewInt(n) }

func gauge(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}
