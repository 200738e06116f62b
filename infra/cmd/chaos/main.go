// Command chaos is the chaos soak (`make chaos`, docs/reliability.md): it runs the dev stack
// (infra/cmd/devstack, built and started as a child process) on a Postgres cluster and a
// redis-server of its own, sends steady signed order load for CHAOS_DURATION while
// injecting faults, lets everything settle, and then checks every invariant from outside
// (the API, as a client would) and from the database and the chain.
//
// Processes: everything it stops or kills it started itself, and it signals them by PID
// only. Postgres is a cluster it initialises with initdb in its work directory (run as the
// postgres user when the soak runs as root); Redis a redis-server without persistence; both
// on free loopback ports. The machine's own servers are never touched. Load goes to
// loopback only.
//
// Load: CHAOS_ACCOUNTS accounts, each with a signed API key and credited 1,000,000 TRX
// through the ledger, send CHAOS_RATE orders per second in total (65,000 energy to one of
// CHAOS_RECEIVERS activated receivers; every other order of the 5m tier, which the stack
// rents for CHAOS_SHORT_RENTAL (its DEV_SHORT_RENTAL) so that rentals end under the faults,
// while its expiry still falls within the load; the others for an hour). Each order is sent as a careful client would: infra/client's CreateOrder (retries
// 429, 5xx and network errors with the same client_order_id, then looks the order up by
// client_order_id) and, while the outcome is still unknown or the service keeps failing,
// CreateOrder again with the same client_order_id until a definite answer.
//
// Faults, one at a time, in this order and then again (CHAOS_FAULTS selects):
//
//	sigkill        SIGKILL of the whole dev stack, restarted at once on the same DATA_DIR
//	pg_restart     Postgres fast shutdown (SIGINT) and start
//	pg_stop        Postgres immediate shutdown (SIGQUIT, a crash), down for CHAOS_OUTAGE
//	redis_flush    FLUSHALL
//	redis_restart  redis-server killed and started empty
//	redis_stop     redis-server killed, down for CHAOS_OUTAGE, started empty
//	node_down      the node answers 503 to every call for CHAOS_OUTAGE (POST /sim/faults)
//	reject         the node refuses the next 5 delegation broadcasts
//	drop           the node accepts and then loses the next 5 broadcasts
//	fork           the last CONFIRMATIONS+4 blocks replaced by another branch (past the
//	               confirmation depth; POST /sim/fork), every other fork twice as deep
//
// When the dev stack exits by itself it is started again, as a supervisor would, and the
// exit is reported.
//
// Checks after the load and the settling (which waits, bounded, for every rental past its
// expiry to end, its undelegation in a block and in the database), by column (check.go,
// docs/reliability.md):
//
//	L lost            an order the client was told exists (201/200) missing from the API or
//	                  the database; a failed order not refunded; a (pool, receiver) pair
//	                  with less delegated on chain than its landed fills
//	D duplicated      a client_order_id with more than one order (API or database)
//	C charged twice   an order captured more than once, refunded more than once or for more
//	                  than its charge; any ledger invariant broken; an account's balance
//	                  from GET /v1/balance not equal to its funding less its orders' net
//	                  charges
//	W charged wrong   a charge other than the amount times the price accepted plus the
//	                  activation fee; a capture other than the charge
//	G delegated twice a (pool, receiver) pair with more delegated on chain than its landed
//	                  fills; more than one landed delegation for one fill; landed fills
//	                  above an order's amount
//	S stuck           an order still in flight, a journal transaction still signed or
//	                  broadcast, an order past its expiry not ended, a client_order_id whose
//	                  outcome the client never learnt; all after up to CHAOS_SETTLE
//	X unexpected exit an exit of the dev stack the soak did not cause
//
// Output: progress and one line per fault kind on stderr, then exactly one line on stdout:
//
//	chaos: N orders, F faults, E ended under faults, P% delivered (R refused by faults), L lost, D duplicated, C charged twice, W charged wrong, G delegated twice, S stuck, X unexpected exits
//
// It exits 1 when a column is not zero or fewer than 90 % of the deliverable orders (those
// not refused by the reject fault) were delivered (2 when the soak itself failed). With
// CHAOS_PLANT=1 it then plants one defect of every kind and fails unless each is reported
// in its column (plant.go).
//
// Settings (environment, defaults in loadSettings): CHAOS_DURATION (the load; at most 50m), CHAOS_RATE (orders/s),
// CHAOS_ACCOUNTS (20), CHAOS_RECEIVERS (300), CHAOS_FAULTS (all kinds above, comma
// separated), CHAOS_OUTAGE (10s), CHAOS_BLOCK_INTERVAL (1s), CHAOS_CONFIRMATIONS (4),
// CHAOS_SETTLE (3m), CHAOS_SHORT_RENTAL (40s), CHAOS_PLANT (0), CHAOS_DIR (work directory with every process's log, kept; default a
// temporary one, removed after a clean run), CHAOS_DEVSTACK (a dev stack binary to use
// instead of building one). Postgres's files live in a temporary directory of their own,
// removed after a clean run.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"rental/infra/config"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	line, bad, err := run(log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	fmt.Println(line)
	if bad {
		os.Exit(1)
	}
}

type settings struct {
	duration, outage, blockInterval, settle time.Duration
	shortRental                             time.Duration // DEV_SHORT_RENTAL of the stack
	plant                                   bool
	rate                                    float64
	accounts, receivers, confirmations      int
	faults                                  []string
	dir, devstack                           string
}

var allFaults = []string{"sigkill", "pg_restart", "pg_stop", "redis_flush", "redis_restart", "redis_stop", "node_down", "reject", "drop", "fork"}

func loadSettings() (settings, error) {
	env := config.NewEnv()
	dur, num := env.Duration, env.PositiveInt
	s := settings{
		duration:      dur("CHAOS_DURATION", 2*time.Minute),
		outage:        dur("CHAOS_OUTAGE", 10*time.Second),
		blockInterval: dur("CHAOS_BLOCK_INTERVAL", time.Second),
		settle:        dur("CHAOS_SETTLE", 3*time.Minute),
		rate:          float64(num("CHAOS_RATE", 12)),
		accounts:      num("CHAOS_ACCOUNTS", 20),
		receivers:     num("CHAOS_RECEIVERS", 300),
		confirmations: num("CHAOS_CONFIRMATIONS", 4),
		shortRental:   dur("CHAOS_SHORT_RENTAL", 40*time.Second),
		plant:         os.Getenv("CHAOS_PLANT") == "1",
		faults:        allFaults,
		dir:           os.Getenv("CHAOS_DIR"),
		devstack:      os.Getenv("CHAOS_DEVSTACK"),
	}
	if v := os.Getenv("CHAOS_FAULTS"); v != "" {
		s.faults = nil
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			known := false
			for _, k := range allFaults {
				known = known || k == f
			}
			if !known {
				env.Failf("CHAOS_FAULTS: unknown fault %q (want some of %s)", f, strings.Join(allFaults, ","))
			}
			s.faults = append(s.faults, f)
		}
	}
	// Hour-long orders must not expire while the soak settles and checks.
	if s.duration > 50*time.Minute {
		env.Failf("CHAOS_DURATION: at most 50m (the load's hour-long orders must still run when it checks)")
	}
	return s, env.Err()
}

func run(log *slog.Logger) (string, bool, error) {
	st, err := loadSettings()
	if err != nil {
		return "", false, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	dir := st.dir
	keep := dir != ""
	if dir == "" {
		if dir, err = os.MkdirTemp("", "chaos-"); err != nil {
			return "", false, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	log.Info("chaos soak", "duration", st.duration, "rate", st.rate, "accounts", st.accounts,
		"faults", strings.Join(st.faults, ","), "dir", dir)

	e, err := startEnv(ctx, st, dir, log)
	if err != nil {
		if e != nil {
			e.close()
		}
		return "", false, fmt.Errorf("%w (logs in %s)", err, dir)
	}
	res, err := e.soak(ctx)
	e.close() // every process the soak started ends here
	if err != nil {
		return "", false, fmt.Errorf("%w (logs in %s, Postgres data in %s)", err, dir, e.pg.dir)
	}
	// After a clean run only a CHAOS_DIR stays (the logs); otherwise everything stays for
	// a post-mortem.
	bad := res.bad()
	if bad {
		log.Info("work directory kept", "dir", dir, "postgres_data", e.pg.dir)
	} else {
		_ = os.RemoveAll(e.pg.dir)
		if !keep {
			_ = os.RemoveAll(dir)
		}
	}
	return res.line(), bad, nil
}

// buildDevstack builds infra/cmd/devstack into dir (the module's own source, wherever the
// soak runs from inside the module).
func buildDevstack(dir string) (string, error) {
	bin := filepath.Join(dir, "devstack")
	cmd := exec.Command("go", "build", "-o", bin, "rental/infra/cmd/devstack")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build devstack: %w\n%s", err, out)
	}
	return bin, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
