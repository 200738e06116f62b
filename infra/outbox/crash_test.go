package outbox_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/testenv"
)

// buildRelay compiles infra/cmd/relay, the binary operators run, into a temp dir.
func buildRelay(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build the relay binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "relay")
	cmd := exec.Command(goBin, "build", "-o", bin, "rental/infra/cmd/relay")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build relay: %v\n%s", err, out)
	}
	return bin
}

// relayProcess starts the relay binary; its log goes to a file shown if the test fails.
func relayProcess(t *testing.T, bin, dbURL, addr, name string) *exec.Cmd {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "KAFKA_BROKERS="+addr, "OUTBOX_SWEEP_INTERVAL=200ms", "METRICS_ADDR=off")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // this process only, by PID
			_ = cmd.Wait()
		}
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, b)
		}
	})
	return cmd
}

func published(t *testing.T, db *testenv.DB) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The check: SIGKILL the relay in the middle of a stream of outbox writes,
// restart it (two replicas this time), and every committed event reaches Kafka, in order
// per key.
func TestRelaySIGKILLMidStreamLosesNothing(t *testing.T) {
	db := testenv.Postgres(t)
	bin := buildRelay(t)
	addr := startBroker(t)
	ctx := context.Background()

	const total, backlog, half = 11400, 10000, 10400
	keys := keysN(16)
	written := map[string][]string{}
	// A backlog first, so the relay is busy with full batches when it is killed. It is
	// written in one transaction: the relay drains 600 rows in a poll or two, faster than
	// the test sees its first publication on a busy machine, and then keeps pace with the
	// writer, leaving nothing unpublished to kill it over; 10,000 take it about a second.
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		return writeEvents(ctx, tx, keys, 0, backlog, written, nil)
	}); err != nil {
		t.Fatal(err)
	}
	var committed atomic.Int64
	committed.Store(backlog)
	killed := make(chan struct{})
	writerDone := make(chan error, 1)
	writeStart := time.Now()
	go func() {
		// The writer pauses once at the half-way mark until the kill happened, so the
		// kill always lands mid-stream whatever the machine's speed.
		writerDone <- writeEvents(ctx, db.Pool, keys, backlog, total-backlog, written, func(i int) {
			committed.Store(int64(i + 1))
			if i+1 == half {
				<-killed
			}
		})
	}()

	first := relayProcess(t, bin, db.URL, addr, "relay-1")
	eventually(t, 30*time.Second, "first relay publishing", func() bool { return published(t, db) > 0 })
	if err := first.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = first.Wait()
	atKill, pubAtKill := committed.Load(), published(t, db)
	close(killed)
	t.Logf("SIGKILL with %d events committed, %d marked published", atKill, pubAtKill)
	if atKill >= total || pubAtKill >= int(atKill) {
		t.Fatalf("the kill did not land mid-stream: %d committed, %d published", atKill, pubAtKill)
	}

	// Rows keep being committed while no relay runs; then two replicas take over.
	eventually(t, 30*time.Second, "writes continue while the relay is down", func() bool { return committed.Load() > half })
	second := relayProcess(t, bin, db.URL, addr, "relay-2")
	relayProcess(t, bin, db.URL, addr, "relay-3")
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	t.Logf("writer: %d events, one transaction each, %.0f events/s", total-backlog, float64(total-backlog)/time.Since(writeStart).Seconds())
	eventually(t, 60*time.Second, "outbox drained after restart", func() bool { return unpublished(t, db.Pool) == 0 })

	read, dups := readOrderEvents(t, addr, total, 30*time.Second)
	assertKeyOrder(t, written, read)
	t.Logf("%d events on Kafka, none lost, %d duplicate deliveries (at least once)", total, dups)

	// SIGTERM is a clean shutdown: exit status 0, promptly.
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- second.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("relay exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("relay did not stop within 15s of SIGTERM")
	}
}
