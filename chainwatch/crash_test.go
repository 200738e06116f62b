package chainwatch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/infra/tron"
)

// The SIGKILL test re-runs this test binary as a child process that only follows the
// chain (see TestMain); the parent kills it with SIGKILL part-way through a catch-up.
const (
	envCrashChild = "CHAINWATCH_TEST_CHILD"
	envChildDB    = "CHAINWATCH_TEST_DB"
	envChildNode  = "CHAINWATCH_TEST_NODE"
	envChildUSDT  = "CHAINWATCH_TEST_USDT"
)

func TestMain(m *testing.M) {
	if os.Getenv(envCrashChild) == "1" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// runChild follows the chain with small batches until it is killed.
func runChild() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv(envChildDB))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	token, err := tron.ParseAddress(os.Getenv(envChildUSDT))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	f, err := New(Options{
		Pool: pool, Source: NewNodeSource(tron.NewClient(os.Getenv(envChildNode)), 4), Outbox: outbox.InsertRecord,
		Network: testNet, Tokens: []tron.Address{token}, Start: 0, BatchBlocks: 5, Window: 50,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := f.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A chainwatch process killed with SIGKILL in the middle of a catch-up, then restarted,
// leaves every transfer in the outbox exactly once: the batch in flight was rolled back
// with its cursor, and the restart reads it again.
func TestSIGKILLMidCatchUpNeitherDuplicatesNorLoses(t *testing.T) {
	db := testenv.Postgres(t)
	sim := startSim(t)
	want := map[string]bool{}
	for i := range 30 {
		want[sim.trx(alice, int64(1000+i))] = true
		want[sim.usdtTransfer(bob, int64(2000+i))] = true
		sim.mine(80)
	}
	head := sim.head()

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envCrashChild+"=1", envChildDB+"="+db.URL, envChildNode+"="+sim.url, envChildUSDT+"="+sim.usdt.String())
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// The kill lands at a sixth of the chain: the child follows about 1–2 blocks a
	// millisecond here, so the rest (2,000 blocks) leaves a second or more for a test
	// process slowed by the packages CI runs beside it.
	waitFor(t, 30*time.Second, "the child to be part-way", func() (bool, error) {
		return cursorNum(t, db.Pool) >= head/6, nil
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killedAt := cursorNum(t, db.Pool)
	if killedAt >= head {
		t.Fatalf("the child finished (%d of %d) before it was killed", killedAt, head)
	}
	before := len(emitted(t, db.Pool))

	f := newTestFollower(t, db.Pool, sim.source(), testOutbox(), func(o *Options) { o.Tokens = []tron.Address{sim.usdt} })
	catchUp(t, f)
	got := emitted(t, db.Pool)
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g.DedupeKey()] {
			t.Errorf("duplicate fact %s", g.DedupeKey())
		}
		seen[g.DedupeKey()] = true
		if !want[g.TxID] {
			t.Errorf("unexpected fact %+v", g)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d facts after the restart, want %d", len(got), len(want))
	}
	t.Logf("killed at block %d of %d with %d facts committed", killedAt, head, before)
}
