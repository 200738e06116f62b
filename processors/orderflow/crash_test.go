package orderflow

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rental/infra/testenv/chainstack"
	"rental/schemas/orders"
)

// replica is one processor process started by the test.
type replica struct {
	cmd *exec.Cmd
}

// Three processor replicas (the real binary, separate processes) work through 500 orders
// while the test SIGKILLs a random one every few hundred milliseconds and starts it again.
// Afterwards: every order is active (none lost), each receiver holds exactly its order's
// delegation on chain (none delegated twice), every journal step was signed once, and the
// ledger invariants hold.
func TestSIGKILLDuringFiveHundredOrdersAcrossThreeReplicas(t *testing.T) {
	const n = 500
	e := newEnv(t, 20_000_000, 20_000_000)
	bin := filepath.Join(t.TempDir(), "orderflow")
	if out, err := exec.Command("go", "build", "-o", bin, "rental/processors/cmd/orderflow").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	pools := make([]string, len(e.pools))
	for i, k := range e.pools {
		pools[i] = k.Address().String()
	}
	envv := append(os.Environ(), "DATABASE_URL="+e.db.URL, "KAFKA_BROKERS="+e.brokers, "TRON_NODE_URL="+e.simURL,
		"SIGNER_KEYS="+chainstack.SignerKey().Hex(), "POOL_ADDRESSES="+strings.Join(pools, ","), "NETWORK=mainnet", "METRICS_ADDR=off",
		"ORDER_LAND_GRACE=2s", "KAFKA_SESSION_TIMEOUT=6s", "CONFIRMATIONS=1")

	logDir := t.TempDir()
	var mu sync.Mutex
	reps := make([]*replica, 3)
	start := func(i int) {
		r := &replica{}
		r.cmd = exec.Command(bin)
		r.cmd.Env = envv
		lf, err := os.OpenFile(filepath.Join(logDir, fmt.Sprintf("replica-%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer lf.Close()
		r.cmd.Stdout, r.cmd.Stderr = lf, lf
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		reps[i] = r
	}
	for i := range reps {
		start(i)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range reps {
			if r.cmd.ProcessState == nil {
				_ = r.cmd.Process.Kill() // only processes this test started, by PID
				_ = r.cmd.Wait()
			}
		}
	})

	// Receivers exist on chain; a tenth of the orders also ask for activation of a
	// fresh address.
	accs := make([]string, 20)
	for i := range accs {
		accs[i] = e.account(1_000)
	}
	specs := make([]orderSpec, n)
	for i := range specs {
		s := orderSpec{resource: orders.Energy, amount: 32_000 + int64(i)*100, tier: "1h"}
		if i%10 == 0 {
			s.receiver, s.activate = e.receiver(false), true
		} else {
			s.receiver = e.receiver(true)
		}
		specs[i] = s
	}

	stopKill := make(chan struct{})
	killed := 0
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopKill:
				return
			case <-time.After(time.Duration(150+rand.IntN(350)) * time.Millisecond):
			}
			mu.Lock()
			i := rand.IntN(len(reps))
			_ = reps[i].cmd.Process.Signal(syscall.SIGKILL)
			_ = reps[i].cmd.Wait()
			killed++
			start(i)
			mu.Unlock()
		}
	}()

	ids := make([]string, n)
	owner := make([]string, n)
	for i, s := range specs {
		owner[i] = accs[i%len(accs)]
		ids[i] = e.order(owner[i], s).ID
	}
	// Keep killing for a while into the processing, then let them finish.
	time.Sleep(4 * time.Second)
	close(stopKill)
	wg.Wait()
	t.Logf("%d SIGKILLs while %d orders were processed", killed, n)

	deadline := time.Now().Add(3 * time.Minute)
	for {
		var active, other int
		err := e.db.Pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE status = 'active'),
			count(*) FILTER (WHERE status <> 'active') FROM orders`).Scan(&active, &other)
		if err != nil {
			t.Fatal(err)
		}
		if active == n {
			break
		}
		if time.Now().After(deadline) {
			var states []string
			rows, _ := e.db.Pool.Query(context.Background(), `SELECT status || ': ' || count(*) FROM orders GROUP BY status`)
			for rows.Next() {
				var s string
				_ = rows.Scan(&s)
				states = append(states, s)
			}
			rows.Close()
			logs, _ := os.ReadFile(filepath.Join(logDir, "replica-0.log"))
			if len(logs) > 8000 {
				logs = logs[len(logs)-8000:]
			}
			t.Fatalf("after 3 minutes: %v; replica 0 log (tail):\n%s", states, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}

	ctx := context.Background()
	// A step may be signed again only after its earlier transaction was refused as expired
	// and the node confirmed it has no such transaction (dropped); never two live ones.
	var doubleSigned, resigned int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT order_id, purpose, fill_seq FROM signed_txs
		WHERE purpose IN ('delegate', 'activate') AND state <> 'dropped' GROUP BY 1, 2, 3 HAVING count(*) > 1) d`).Scan(&doubleSigned); err != nil {
		t.Fatal(err)
	}
	if doubleSigned != 0 {
		t.Fatalf("%d steps have more than one transaction that was not dropped", doubleSigned)
	}
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM signed_txs WHERE attempt > 0`).Scan(&resigned); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d transactions were signed again after their first expired unsent", resigned)
	for i, id := range ids {
		var want int64
		if err := e.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(balance_sun), 0) FROM order_fills WHERE order_id = $1 AND state = 'landed'`, id).
			Scan(&want); err != nil {
			t.Fatal(err)
		}
		got := e.delegated(specs[i].receiver, orders.Energy)
		if got != want || want == 0 {
			t.Fatalf("order %s: receiver %s holds %d SUN of delegation, the order's fills %d", id, specs[i].receiver, got, want)
		}
	}
	for _, a := range accs {
		if _, res := e.balance(a); res != 0 {
			t.Errorf("account %s still has %d SUN reserved after every order was delivered", a, res)
		}
	}
	e.invariants()
}
