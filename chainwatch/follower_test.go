package chainwatch

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"rental/infra/chainstore"
	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/topics"
)

// These tests run the follow and fork logic against the in-memory chain and a real
// Postgres. Records go to a table of the test database through the same transaction as
// the cursor, as the real outbox does; the Kafka path is covered by integration_test.go.

var (
	usdt    = addr("usdt")
	other   = addr("another token")
	alice   = addr("alice")
	bob     = addr("bob")
	carol   = addr("carol")
	router  = addr("router")
	testNet = network.Nile
)

// testOutbox is the real transactional outbox; these tests read its table back instead of
// running the relay.
func testOutbox() OutboxWriter { return outbox.InsertRecord }

// emitted returns every fact written to the outbox so far, in write order.
func emitted(t testing.TB, pool *pgxpool.Pool) []events.ChainFact {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT topic, key, value, headers FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.ChainFact
	for rows.Next() {
		var topic, key string
		var raw []byte
		var headers map[string]string
		if err := rows.Scan(&topic, &key, &raw, &headers); err != nil {
			t.Fatal(err)
		}
		var f events.ChainFact
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		if topic != topics.ChainFacts.Name || key != f.TxID {
			t.Fatalf("record on %s with key %s, want %s keyed by tx id %s", topic, key, topics.ChainFacts.Name, f.TxID)
		}
		if headers["kind"] != string(f.Kind) || headers["fact_id"] != f.FactID {
			t.Fatalf("headers %v do not describe fact %s/%s", headers, f.Kind, f.FactID)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func newTestFollower(t testing.TB, pool *pgxpool.Pool, src BlockSource, ob OutboxWriter, mod func(*Options)) *Follower {
	t.Helper()
	o := Options{Pool: pool, Source: src, Outbox: ob, Network: testNet, Tokens: []tron.Address{usdt}, Start: 0, Window: 50}
	if mod != nil {
		mod(&o)
	}
	f, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// catchUp polls until the follower reports it is caught up.
func catchUp(t testing.TB, f *Follower) {
	t.Helper()
	ctx := context.Background()
	for range 10_000 {
		done, err := f.poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
	}
	t.Fatal("follower never caught up")
}

func storedCursor(t testing.TB, pool *pgxpool.Pool) (int64, string, time.Time) {
	t.Helper()
	var n int64
	var id string
	var at time.Time
	if err := pool.QueryRow(context.Background(), `SELECT block_num, block_hash, updated_at FROM chain_cursor WHERE name = 'chainwatch'`).Scan(&n, &id, &at); err != nil {
		t.Fatal(err)
	}
	return n, id, at
}

func TestFollowEmitsEachTransferAndTrackedResultOnce(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	ob := testOutbox()
	c := newMemChain()
	c.mine(3)
	trxID := c.trx(alice, bob, 1_500_000)
	big1, _ := new(big.Int).SetString("123456789012345678901234567890", 10) // beyond int64
	usdtID := c.trc20(alice, router, false,
		transferLog(usdt, alice, bob, big.NewInt(5_000_000)),
		transferLog(other, alice, bob, big.NewInt(7)), // token not configured: ignored
		transferLog(usdt, bob, carol, big1))
	c.trc20(alice, usdt, true, transferLog(usdt, alice, carol, big.NewInt(9))) // reverted call: no fact
	c.mine(2)
	// A tracked transaction with a non-success result (tracked before it lands).
	if err := chainstore.Track(ctx, db.Pool, usdtID); err != nil {
		t.Fatal(err)
	}

	f := newTestFollower(t, db.Pool, c, ob, nil)
	catchUp(t, f)

	got := emitted(t, db.Pool)
	if len(got) != 4 {
		t.Fatalf("got %d facts, want 4: %+v", len(got), got)
	}
	trx, log0, log2, res := got[0], got[1], got[2], got[3]
	if trx.Kind != events.FactTRXTransfer || trx.TxID != trxID || trx.From != alice.String() || trx.To != bob.String() ||
		trx.AmountSun != 1_500_000 || trx.BlockNum != 4 || trx.LogIndex != nil || trx.Network != testNet {
		t.Errorf("trx fact = %+v", trx)
	}
	if log0.Kind != events.FactTRC20Transfer || log0.TxID != usdtID || *log0.LogIndex != 0 || log0.Token != usdt.String() ||
		log0.Amount != "5000000" || log0.From != alice.String() || log0.To != bob.String() {
		t.Errorf("first usdt fact = %+v", log0)
	}
	if *log2.LogIndex != 2 || log2.Amount != "123456789012345678901234567890" || log2.From != bob.String() || log2.To != carol.String() {
		t.Errorf("second usdt fact (log index 2, >int64 amount) = %+v", log2)
	}
	if res.Kind != events.FactTxResult || res.TxID != usdtID || res.Result != "SUCCESS" || res.ContractType != "TriggerSmartContract" ||
		res.From != alice.String() || res.FeeSun != 345 {
		t.Errorf("tx_result fact = %+v", res)
	}
	if want := events.FactID(events.FactTRXTransfer, trxID, -1, c.blocks[4].ID); trx.FactID != want {
		t.Errorf("fact id %s, want deterministic %s", trx.FactID, want)
	}

	// Idle polls emit nothing more but keep the cursor's updated_at fresh.
	num, id, at1 := storedCursor(t, db.Pool)
	if num != 8 || id != c.blocks[8].ID {
		t.Fatalf("cursor %d/%s, want head 8/%s", num, id, c.blocks[8].ID)
	}
	time.Sleep(5 * time.Millisecond) // let now() move on; not synchronisation
	if done, err := f.poll(ctx); err != nil || !done {
		t.Fatalf("idle poll: done=%v err=%v", done, err)
	}
	if _, _, at2 := storedCursor(t, db.Pool); !at2.After(at1) {
		t.Errorf("idle poll did not touch updated_at (%v then %v)", at1, at2)
	}
	if n := len(emitted(t, db.Pool)); n != 4 {
		t.Errorf("idle poll emitted more facts: %d", n)
	}
}

func TestConfirmationDepthHoldsBackRecentBlocks(t *testing.T) {
	db := testenv.Postgres(t)
	ob := testOutbox()
	c := newMemChain()
	c.trx(alice, bob, 1)
	c.trx(alice, bob, 2) // block 2
	f := newTestFollower(t, db.Pool, c, ob, func(o *Options) { o.Confirmations = 1 })
	catchUp(t, f)
	if got := emitted(t, db.Pool); len(got) != 1 || got[0].AmountSun != 1 {
		t.Fatalf("with 1 confirmation only block 1 is final; got %+v", got)
	}
	c.mine(1)
	catchUp(t, f)
	if got := emitted(t, db.Pool); len(got) != 2 || got[1].AmountSun != 2 {
		t.Fatalf("after one more block, block 2 is final; got %+v", got)
	}
}

func TestForkRevertsOrphanedFactsAndReemitsOnNewBranch(t *testing.T) {
	db := testenv.Postgres(t)
	ob := testOutbox()
	c := newMemChain()
	c.mine(5)
	kept := c.trx(alice, bob, 10) // block 6, below the fork
	c.mine(1)
	a := c.trx(alice, bob, 20)                                                        // block 8
	u := c.trc20(alice, usdt, false, transferLog(usdt, alice, carol, big.NewInt(30))) // block 9
	f := newTestFollower(t, db.Pool, c, ob, nil)
	catchUp(t, f)
	before := emitted(t, db.Pool)
	if len(before) != 3 {
		t.Fatalf("before the fork: %d facts, want 3", len(before))
	}

	c.fork(2) // blocks 8 and 9 orphaned; their transactions land again in blocks 9 and 10
	catchUp(t, f)
	got := emitted(t, db.Pool)[3:]
	if len(got) != 4 {
		t.Fatalf("after the fork: %d new facts, want 2 reverts + 2 re-emitted: %+v", len(got), got)
	}
	// Reverts come first, newest orphaned fact first, and name what they cancel.
	if got[0].Kind != events.FactRevert || got[0].Reverts != before[2].FactID || got[0].TxID != u || got[0].RevertedKind != events.FactTRC20Transfer {
		t.Errorf("first revert = %+v, want revert of %s", got[0], before[2].FactID)
	}
	if got[1].Kind != events.FactRevert || got[1].Reverts != before[1].FactID || got[1].TxID != a || got[1].AmountSun != 20 {
		t.Errorf("second revert = %+v, want revert of %s", got[1], before[1].FactID)
	}
	if got[2].Kind != events.FactTRXTransfer || got[2].TxID != a || got[2].BlockNum != 9 || got[2].BlockID != c.blocks[9].ID || got[2].FactID == before[1].FactID {
		t.Errorf("re-emitted trx = %+v", got[2])
	}
	if got[3].Kind != events.FactTRC20Transfer || got[3].TxID != u || got[3].BlockNum != 10 || got[3].Amount != "30" {
		t.Errorf("re-emitted usdt = %+v", got[3])
	}
	for _, g := range got {
		if g.TxID == kept {
			t.Errorf("the fact below the fork was touched: %+v", g)
		}
	}
	if n, id, _ := storedCursor(t, db.Pool); n != 10 || id != c.blocks[10].ID {
		t.Errorf("cursor %d/%s after the fork, want 10 on the new branch", n, id)
	}
	if m := testutilCount(f.m.forks); m != 1 {
		t.Errorf("forks metric %v, want 1", m)
	}
	// Facts after the rewind carry its epoch: a block that came back unchanged would be
	// announced under new ids, which consumers do not mistake for a re-read.
	var epoch int64
	if err := db.Pool.QueryRow(context.Background(), `SELECT epoch FROM chain_cursor WHERE name = $1`, chainstore.CursorName).Scan(&epoch); err != nil || epoch != 1 {
		t.Errorf("cursor epoch %d (%v) after one fork, want 1", epoch, err)
	}
	if want := events.FactIDAt(events.FactTRXTransfer, a, -1, c.blocks[9].ID, 1); got[2].FactID != want {
		t.Errorf("re-emitted fact id %s, want the epoch-1 id %s", got[2].FactID, want)
	}
}

func TestForkDeeperThanWindowStopsWithoutWriting(t *testing.T) {
	db := testenv.Postgres(t)
	ob := testOutbox()
	c := newMemChain()
	c.mine(20)
	f := newTestFollower(t, db.Pool, c, ob, func(o *Options) { o.Window = 5 })
	catchUp(t, f)
	c.trx(alice, bob, 1)
	catchUp(t, f)
	c.fork(10)
	_, err := f.poll(context.Background())
	if !errors.Is(err, ErrForkTooDeep) {
		t.Fatalf("poll after a 10-deep fork with a 5-block window: %v, want ErrForkTooDeep", err)
	}
	if n, _, _ := storedCursor(t, db.Pool); n != 21 {
		t.Errorf("cursor moved to %d", n)
	}
	if got := emitted(t, db.Pool); len(got) != 1 {
		t.Errorf("facts written: %+v", got)
	}
}

// A crash anywhere inside the commit (here: the outbox refusing the second record of a
// batch) leaves nothing behind; the next instance emits the batch exactly once.
func TestFailedCommitWritesNothingAndRestartEmitsOnce(t *testing.T) {
	db := testenv.Postgres(t)
	ob := testOutbox()
	c := newMemChain()
	for i := range 5 {
		c.trx(alice, bob, int64(i+1))
	}
	calls := 0
	failing := func(ctx context.Context, tx pgx.Tx, topic topics.Topic, key string, value []byte, h map[string]string) error {
		calls++
		if calls == 2 {
			return errors.New("power cut")
		}
		return ob(ctx, tx, topic, key, value, h)
	}
	f := newTestFollower(t, db.Pool, c, failing, nil)
	if _, err := f.poll(context.Background()); err == nil || !strings.Contains(err.Error(), "power cut") {
		t.Fatalf("poll: %v", err)
	}
	if got := emitted(t, db.Pool); len(got) != 0 {
		t.Fatalf("a failed commit left %d records", len(got))
	}
	if n, _, _ := storedCursor(t, db.Pool); n != -1 {
		t.Fatalf("a failed commit moved the cursor to %d", n)
	}
	f2 := newTestFollower(t, db.Pool, c, ob, nil)
	catchUp(t, f2)
	got := emitted(t, db.Pool)
	if len(got) != 5 {
		t.Fatalf("after restart: %d facts, want 5", len(got))
	}
	for i, g := range got {
		if g.AmountSun != int64(i+1) {
			t.Errorf("fact %d amount %d", i, g.AmountSun)
		}
	}
}

// Two replicas on one database never both commit a block: the loser's commit fails on the
// cursor check and it reloads.
func TestTwoInstancesNeverDuplicate(t *testing.T) {
	db := testenv.Postgres(t)
	ob := testOutbox()
	c := newMemChain()
	f1 := newTestFollower(t, db.Pool, c, ob, func(o *Options) { o.BatchBlocks = 3 })
	f2 := newTestFollower(t, db.Pool, c, ob, func(o *Options) { o.BatchBlocks = 3 })
	ctx := context.Background()
	for i := range 20 {
		c.trx(alice, bob, int64(i+1))
		for _, f := range []*Follower{f1, f2, f2, f1} {
			if _, err := f.poll(ctx); err != nil && !errors.Is(err, chainstore.ErrCursorMoved) {
				t.Fatal(err)
			}
		}
	}
	catchUp(t, f1)
	catchUp(t, f2)
	got := emitted(t, db.Pool)
	if len(got) != 20 {
		t.Fatalf("%d facts from two replicas, want 20", len(got))
	}
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g.DedupeKey()] {
			t.Fatalf("duplicate %s", g.DedupeKey())
		}
		seen[g.DedupeKey()] = true
	}
}

func TestStartAtConfirmedHeadSkipsHistory(t *testing.T) {
	db := testenv.Postgres(t)
	ob := testOutbox()
	c := newMemChain()
	c.trx(alice, bob, 1)
	c.mine(10) // head 11
	f := newTestFollower(t, db.Pool, c, ob, func(o *Options) { o.Start = -1; o.Confirmations = 2 })
	catchUp(t, f)
	if n, _, _ := storedCursor(t, db.Pool); n != 9 {
		t.Fatalf("cursor %d, want the confirmed head 9", n)
	}
	c.trx(alice, bob, 2) // block 12
	c.mine(2)
	catchUp(t, f)
	if got := emitted(t, db.Pool); len(got) != 1 || got[0].AmountSun != 2 {
		t.Fatalf("got %+v, want only the transfer after the start", got)
	}
}

func testutilCount(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
