package chainwatch

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/events"
)

// Integration: the simulator over HTTP (driven through /sim/), the real java-tron client,
// real Postgres, the real outbox and its relay, and the kfake broker over TCP. Facts are
// read back from Kafka by a plain consumer.

type stack struct {
	db     *testenv.DB
	sim    *simNode
	reader *factReader
	outbox OutboxWriter
}

func startStack(t *testing.T) *stack {
	t.Helper()
	db := testenv.Postgres(t)
	addr := startBroker(t)
	s := &stack{db: db, sim: startSim(t), outbox: startOutbox(t, db.Pool, addr)}
	s.reader = readFacts(t, addr)
	return s
}

// running is a follower running in the background until stop (or the test's end).
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func (s *stack) startFollower(t *testing.T) *running {
	t.Helper()
	return s.startFollowerOn(t, s.sim.source())
}

func (s *stack) startFollowerOn(t *testing.T, src BlockSource) *running {
	t.Helper()
	f, err := New(Options{
		Pool: s.db.Pool, Source: src, Outbox: s.outbox, Network: testNet,
		Tokens: []tron.Address{s.sim.usdt}, Confirmations: 0, PollEvery: 10 * time.Millisecond,
		Start: 0, BatchBlocks: 7, Window: 50, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run returned %v on cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func cursorNum(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var n int64
	err := pool.QueryRow(context.Background(), `SELECT coalesce(max(block_num), -1) FROM chain_cursor WHERE name = 'chainwatch'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSimTransfersArriveOnKafkaOnceEach(t *testing.T) {
	s := startStack(t)
	s.startFollower(t)

	trxID := s.sim.trx(alice, 1_500_000)
	usdtID := s.sim.usdtTransfer(bob, 2_500_000)
	s.sim.mine(1)
	got := s.reader.waitCount(2, "the TRX and USDT transfer facts")
	byTx := map[string]events.ChainFact{}
	for _, f := range got {
		byTx[f.TxID] = f
	}
	if f := byTx[trxID]; f.Kind != events.FactTRXTransfer || f.To != alice.String() || f.AmountSun != 1_500_000 || f.From == "" || f.BlockNum != 1 {
		t.Errorf("TRX fact on Kafka: %+v", f)
	}
	if f := byTx[usdtID]; f.Kind != events.FactTRC20Transfer || f.To != bob.String() || f.Amount != "2500000" ||
		f.Token != s.sim.usdt.String() || f.LogIndex == nil || *f.LogIndex != 0 || f.BlockNum != 1 {
		t.Errorf("USDT fact on Kafka: %+v", f)
	}

	// Idle polls and more empty blocks add nothing.
	s.sim.mine(5)
	waitFor(t, 10*time.Second, "the cursor to reach the head", func() (bool, error) {
		return cursorNum(t, s.db.Pool) == s.sim.head(), nil
	})
	s.reader.waitCount(2, "no further facts")
}

func TestSimForkRevertsAndReemitsOncePerBranch(t *testing.T) {
	s := startStack(t)
	s.startFollower(t)

	before := s.sim.trx(carol, 1_000_000) // stays below the fork
	s.sim.mine(3)
	a := s.sim.trx(alice, 2_000_000)
	s.sim.mine(1)
	u := s.sim.usdtTransfer(bob, 3_000_000)
	s.sim.mine(1)
	head := s.sim.head()
	waitFor(t, 10*time.Second, "the follower to read the blocks to be orphaned", func() (bool, error) {
		return cursorNum(t, s.db.Pool) == head, nil
	})
	first := s.reader.waitCount(3, "the facts before the fork")

	fork := s.sim.fork(2) // orphans the blocks of a and u; both land again one block higher
	if len(fork.ReIncluded) != 2 {
		t.Fatalf("simulator re-included %v", fork.ReIncluded)
	}
	got := s.reader.waitCount(7, "two reverts and two re-emitted facts")[3:]

	orig := map[string]events.ChainFact{}
	for _, f := range first {
		orig[f.TxID] = f
	}
	var reverts, again []events.ChainFact
	for _, f := range got {
		if f.Kind == events.FactRevert {
			reverts = append(reverts, f)
		} else {
			again = append(again, f)
		}
	}
	if len(reverts) != 2 || len(again) != 2 {
		t.Fatalf("after the fork: %d reverts and %d facts, want 2 and 2: %+v", len(reverts), len(again), got)
	}
	for _, r := range reverts {
		o, ok := orig[r.TxID]
		if !ok || r.TxID == before || r.Reverts != o.FactID || r.RevertedKind != o.Kind {
			t.Errorf("revert %+v does not cancel an orphaned fact", r)
		}
	}
	for _, f := range again {
		o := orig[f.TxID]
		if (f.TxID != a && f.TxID != u) || f.FactID == o.FactID || f.BlockID == o.BlockID || f.BlockNum != head+1 || f.DedupeKey() != o.DedupeKey() {
			t.Errorf("re-emitted fact %+v vs original %+v", f, o)
		}
	}
	if o := orig[a]; o.AmountSun != 2_000_000 || o.To != alice.String() {
		t.Errorf("orphaned TRX fact %+v", o)
	}
	if o := orig[u]; o.Amount != "3000000" || o.To != bob.String() {
		t.Errorf("orphaned USDT fact %+v", o)
	}
}

// A restart in the middle of a stream (the first instance cancelled while it is catching
// up, a new instance on the same database) neither duplicates nor skips a transfer.
func TestRestartMidStreamNeitherDuplicatesNorSkips(t *testing.T) {
	s := startStack(t)
	const transfers = 40
	want := map[string]int64{}
	for i := range transfers {
		amount := int64(1_000_000 + i)
		want[s.sim.trx(alice, amount)] = amount
		s.sim.mine(1 + i%3)
	}
	s.sim.mine(2)
	head := s.sim.head()

	// Batches of 7 blocks: many commits before the first instance is stopped. Its node
	// serves no block past the middle of the stream, so it is stopped part-way however
	// fast it runs.
	first := s.startFollowerOn(t, &gatedSource{NodeSource: s.sim.source(), last: head / 2})
	waitFor(t, 20*time.Second, "the first instance to be part-way", func() (bool, error) {
		return cursorNum(t, s.db.Pool) >= head/3, nil
	})
	first.stop(t)
	stoppedAt := cursorNum(t, s.db.Pool)
	if stoppedAt >= head {
		t.Fatalf("the first instance finished (%d of %d) before it was stopped", stoppedAt, head)
	}
	s.startFollower(t)
	got := s.reader.waitCount(transfers, "every transfer once")
	seen := map[string]bool{}
	for _, f := range got {
		if seen[f.TxID] {
			t.Errorf("duplicate fact for %s", f.TxID)
		}
		seen[f.TxID] = true
		if want[f.TxID] != f.AmountSun {
			t.Errorf("fact %s amount %d, want %d", f.TxID, f.AmountSun, want[f.TxID])
		}
	}
	t.Logf("first instance stopped at block %d of %d", stoppedAt, head)
}

// gatedSource is a node that serves no block after last: a fetch from beyond it waits until
// the caller gives up.
type gatedSource struct {
	*NodeSource
	last int64
}

func (g *gatedSource) Blocks(ctx context.Context, from int64, n int) ([]Block, error) {
	if from > g.last {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return g.NodeSource.Blocks(ctx, from, min(n, int(g.last-from+1)))
}

// A node outage (the simulator answering 503 to the follower's first calls) delays facts
// but loses none, and Run keeps going without a restart.
func TestNodeOutageIsRetried(t *testing.T) {
	s := startStack(t)
	id := s.sim.trx(alice, 42)
	s.sim.mine(1)
	s.sim.control("/sim/faults", map[string]any{"kind": "node_down", "count": 20}, nil)
	s.startFollower(t)
	got := s.reader.waitCount(1, "the transfer after the outage")
	if got[0].TxID != id || got[0].AmountSun != 42 {
		t.Errorf("fact %+v", got[0])
	}
	resp, err := http.Get(s.sim.url + "/sim/faults")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var left tronsim.Faults
	if err := json.NewDecoder(resp.Body).Decode(&left); err != nil {
		t.Fatal(err)
	}
	if left.NodeDown != 0 {
		t.Errorf("%d node_down answers were never served: the follower did not go through the outage", left.NodeDown)
	}
}
