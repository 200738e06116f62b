package chainwatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/events"
)

const catchUpBlocks = 5000

// catchUpChain builds a simulator chain of about catchUpBlocks blocks with a TRX and a
// USDT transfer buried in it, and returns the two transaction ids.
func catchUpChain(t testing.TB, sim *simNode) (trxID, usdtID string) {
	t.Helper()
	sim.mine(1000)
	trxID = sim.trx(alice, 7_000_001)
	sim.mine(1500)
	usdtID = sim.usdtTransfer(bob, 12_345_678)
	sim.mine(catchUpBlocks - 2500)
	return trxID, usdtID
}

// setOldCursor stores a cursor at block num of the simulator's chain, as a chainwatch
// that stopped long ago would have left it.
func setOldCursor(t testing.TB, pool *pgxpool.Pool, sim *simNode, num int64) {
	t.Helper()
	b, err := sim.client.GetBlockByNum(context.Background(), num)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `INSERT INTO chain_cursor (name, block_num, block_hash) VALUES ('chainwatch', $1, $2)
		ON CONFLICT (name) DO UPDATE SET block_num = $1, block_hash = $2`, num, b.BlockID); err != nil {
		t.Fatal(err)
	}
}

// runUntilCursor runs a follower until the stored cursor reaches num and returns how long
// that took.
func runUntilCursor(t testing.TB, f *Follower, pool *pgxpool.Pool, num int64) time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f.Run(ctx) }()
	waitFor(t, 60*time.Second, "the cursor to reach the head", func() (bool, error) {
		var got int64
		err := pool.QueryRow(ctx, `SELECT block_num FROM chain_cursor WHERE name = 'chainwatch'`).Scan(&got)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return false, err
		}
		return got >= num, nil
	})
	elapsed := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after cancel, want nil", err)
	}
	return elapsed
}

func TestCatchUpFromOldCursorOverSimulatorBlocks(t *testing.T) {
	db := testenv.Postgres(t)
	ob := testOutbox()
	sim := startSim(t)
	trxID, usdtID := catchUpChain(t, sim)
	head := sim.head()
	setOldCursor(t, db.Pool, sim, 10)

	f := newTestFollower(t, db.Pool, sim.source(), ob, func(o *Options) {
		o.Tokens = []tron.Address{sim.usdt}
		o.PollEvery = 20 * time.Millisecond
	})
	elapsed := runUntilCursor(t, f, db.Pool, head)
	t.Logf("caught up %d blocks in %v: %s", head-10, elapsed.Round(time.Millisecond), fmtRate(head-10, elapsed))

	got := emitted(t, db.Pool)
	if len(got) != 2 {
		t.Fatalf("%d facts, want the TRX and the USDT transfer: %+v", len(got), got)
	}
	if g := got[0]; g.Kind != events.FactTRXTransfer || g.TxID != trxID || g.To != alice.String() || g.AmountSun != 7_000_001 || g.BlockNum != 1001 {
		t.Errorf("trx fact %+v", g)
	}
	if g := got[1]; g.Kind != events.FactTRC20Transfer || g.TxID != usdtID || g.To != bob.String() || g.Amount != "12345678" ||
		g.Token != sim.usdt.String() || g.BlockNum != 2501 {
		t.Errorf("usdt fact %+v", g)
	}
	var window int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM chain_blocks`).Scan(&window); err != nil {
		t.Fatal(err)
	}
	if window != 50 {
		t.Errorf("window holds %d blocks, want the configured 50", window)
	}
}

// BenchmarkCatchUp measures catch-up over catchUpBlocks simulator blocks (HTTP, real
// client, real Postgres, batched commits). It reports blocks/s.
func BenchmarkCatchUp(b *testing.B) {
	db := testenv.Postgres(b)
	ob := testOutbox()
	sim := startSim(b)
	catchUpChain(b, sim)
	head := sim.head()
	ctx := context.Background()
	var blocks int64
	var spent time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := db.Pool.Exec(ctx, `TRUNCATE chain_blocks, chain_block_facts, outbox; DELETE FROM chain_cursor`); err != nil {
			b.Fatal(err)
		}
		f := newTestFollower(b, db.Pool, sim.source(), ob, func(o *Options) { o.Tokens = []tron.Address{sim.usdt} })
		b.StartTimer()
		start := time.Now()
		for {
			done, err := f.poll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if done {
				break
			}
		}
		spent += time.Since(start)
		blocks += head + 1
	}
	b.ReportMetric(float64(blocks)/spent.Seconds(), "blocks/s")
}
