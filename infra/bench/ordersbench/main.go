// Command ordersbench measures signed POST /v1/orders with the whole pipeline running, next to
// pgbench TPC-B on the same database in the same run (infra/bench/orders.sh, `make bench`).
//
// It creates a fresh database bench_orders_<pid> on the server of DATABASE_URL (dropped at
// the end), applies the migrations, runs pgbench TPC-B there (once flat out for its tps, once
// throttled to half that for its own p99 at half rate), then starts in this process on
// loopback with free ports: an embedded Kafka broker (kfake, data in a temporary directory),
// the TRON node simulator (fast blocks, one large own stake pool, pre-activated receivers),
// the outbox relay, chainwatch, the pricer, the order processor and the edge, each built by
// the infra/stages packages as the binaries build them, each stage with its own Postgres pool as when they
// run as separate binaries. Redis is the server of REDIS_URL on a database of its own
// (ORDERS_BENCH_REDIS_DB, default 12), whose "rental:" and "pricing:" keys are deleted at the end.
//
// Load: many accounts (each with an orders.write key, credited through the ledger), each
// calling from its own loopback source address (127.1.x.y) so that the per-IP budget
// (100/s) applies per account, as it does for real integrators. Every request is a signed
// POST /v1/orders with a fresh client_order_id: 65,000 energy for 1 h to an activated
// receiver. Phase 1 is a closed loop (N workers, each sending its next order when the
// previous answered) and gives orders/s, p50 and p99; phase 2 is an open loop at half that
// rate (latency counted from each request's scheduled start, so a stall is not hidden) and
// gives p99 at half rate. Only 201 counts as an order; anything else is an error, reported
// on stderr, and more than 1 % errors in a phase fails the run.
//
// Stdout gets exactly one line:
//
//	bench orders_create: V orders/s, ratio R vs pgbench TPC-B s=S c=C (T tps); p50 X ms, p99 Y ms, p99 at half rate Z ms, ratio Q vs pgbench TPC-B s=S c=C p99 at half its rate (P ms)
//
// Everything else goes to stderr. Settings (environment): ORDERS_BENCH_DURATION (10s, each
// phase), ORDERS_BENCH_WARMUP (2s), ORDERS_BENCH_WORKERS (48), ORDERS_BENCH_ACCOUNTS (1000),
// ORDERS_BENCH_RECEIVERS (1000; 4000 in delivery mode), ORDERS_BENCH_EDGE_CONNS (16, the edge's pool_max_conns),
// ORDERS_BENCH_PGBENCH_CLIENTS (8), ORDERS_BENCH_PGBENCH_SCALE (the client count; never
// less), ORDERS_BENCH_PGBENCH_TIME (10s), PGBENCH (pgbench
// binary), ORDERS_BENCH_CPUPROFILE (file: CPU profile of the closed-loop phase; in delivery mode, of the first hold's measured window),
// ORDERS_BENCH_TRACE_SQL (1: round trips, statements and their time per order on the edge's and the order processor's pools),
// ORDERS_BENCH_LOG (warn: stage log level), ORDERS_BENCH_PROCESSOR (off: diagnostic run
// without the order processor, to tell creation's cost from the rest of the pipeline's),
// ORDERS_BENCH_PROCESSOR_CONNS (the order processor's pool size; default as its binary's).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/errgroup"

	"rental/infra/accounts"
	"rental/infra/config"
	"rental/infra/deposits"
	"rental/infra/kafka"
	"rental/infra/ledgerstore"
	"rental/infra/metrics"
	"rental/infra/pg"
	"rental/infra/redisx"
	"rental/infra/reqsign"
	"rental/infra/stages"
	"rental/infra/stages/chainstage"
	"rental/infra/stages/edgestage"
	"rental/infra/stages/ledgerstage"
	"rental/infra/stages/orderflowstage"
	"rental/infra/stages/pricerstage"
	"rental/infra/stages/relaystage"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/ledger"
	"rental/schemas/scopes"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	runner := run
	if os.Getenv("ORDERS_BENCH_MODE") == "delivery" {
		runner = runDelivery // delivery.go
	}
	line, err := runner(log)
	var nh notHeld
	if errors.As(err, &nh) {
		// The line still goes out, marked, so the summary shows what failed; the exit
		// status fails the run.
		fmt.Println(nh.line)
		fmt.Fprintln(os.Stderr, "ordersbench: no hold held")
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ordersbench:", err)
		os.Exit(1)
	}
	fmt.Println(line)
}

// ---- settings ----

type settings struct {
	duration, warmup       time.Duration
	workers, accts, recvs  int
	edgeConns              int
	pgbenchClients         int
	pgbenchScale           int // pgbench -i -s: never below pgbenchClients (refName)
	pgbenchTime            time.Duration
	pgbench                string
	cpuProfile             string
	traceSQL               bool
	noProcessor            bool
	processorConns         int // 0: as its binary sizes it
	processors             int // order processor replicas, each with its own pool
	blockInterval          time.Duration
	confirmations          int // 0: CONFIRMATIONS as configured
	deliveryMode           bool
	redisDB                int
	orderEnergy            int64
	orderTier              string
	maxErrorRate           float64
	halfRateP99TargetMilli float64
	// minSupplyOrders is how many orders the delivery mode's supply must be able to hold
	// from the start: at least what its longest run accepts, as no order of the 1 h tier
	// ends during it (docs/order-processing.md has the runs' lengths and rates).
	minSupplyOrders int
}

func loadSettings() (settings, error) {
	env := config.NewEnv()
	dur, num := env.Duration, env.PositiveInt
	s := settings{
		duration:       dur("ORDERS_BENCH_DURATION", 10*time.Second),
		warmup:         dur("ORDERS_BENCH_WARMUP", 2*time.Second),
		workers:        num("ORDERS_BENCH_WORKERS", 48),
		accts:          num("ORDERS_BENCH_ACCOUNTS", 1000),
		recvs:          num("ORDERS_BENCH_RECEIVERS", 1000),
		edgeConns:      num("ORDERS_BENCH_EDGE_CONNS", 16),
		pgbenchClients: num("ORDERS_BENCH_PGBENCH_CLIENTS", 8),
		pgbenchScale:   num("ORDERS_BENCH_PGBENCH_SCALE", 0),
		pgbenchTime:    dur("ORDERS_BENCH_PGBENCH_TIME", 10*time.Second),
		pgbench:        os.Getenv("PGBENCH"),
		cpuProfile:     os.Getenv("ORDERS_BENCH_CPUPROFILE"),
		traceSQL:       os.Getenv("ORDERS_BENCH_TRACE_SQL") == "1",
		noProcessor:    os.Getenv("ORDERS_BENCH_PROCESSOR") == "off",
		processorConns: num("ORDERS_BENCH_PROCESSOR_CONNS", 0),
		processors:     num("ORDERS_BENCH_PROCESSORS", 1),
		confirmations:  num("ORDERS_BENCH_CONFIRMATIONS", 0),
		deliveryMode:   os.Getenv("ORDERS_BENCH_MODE") == "delivery",
		redisDB:        12,
		orderEnergy:    65_000,
		orderTier:      "1h",
		maxErrorRate:   0.01,
	}
	// Creation is measured on fast blocks; delivery at a realistic interval (3 s, mainnet's).
	s.blockInterval = 200 * time.Millisecond
	if s.deliveryMode {
		s.blockInterval = 3 * time.Second
	}
	s.blockInterval = dur("ORDERS_BENCH_BLOCK_INTERVAL", s.blockInterval)
	if s.deliveryMode {
		// Each receiver holds at most RECEIVER_MAX_ENERGY of live orders (769 of 65,000 at
		// the default): 4,000 receivers let a whole delivery run deliver.
		s.recvs = num("ORDERS_BENCH_RECEIVERS", 4000)
		s.minSupplyOrders = 1_000_000
	}
	if v := os.Getenv("ORDERS_BENCH_REDIS_DB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 15 {
			env.Failf("ORDERS_BENCH_REDIS_DB: want 0 to 15")
		} else {
			s.redisDB = n
		}
	}
	if s.pgbench == "" {
		s.pgbench = "pgbench"
	}
	// TPC-B updates one pgbench_branches row per scale unit: with fewer branches than
	// clients the reference measures waits on those rows, not the database (pgbench's own
	// documentation asks for a scale at least the client count), and every ratio against it
	// would be flattered.
	s.pgbenchScale = max(s.pgbenchScale, s.pgbenchClients)
	if s.accts > 60000 {
		env.Failf("ORDERS_BENCH_ACCOUNTS: at most 60000 (one loopback source address each)")
	}
	return s, env.Err()
}

// refName names the reference with its scale and clients, as every bench line prints it.
func (s settings) refName() string {
	return fmt.Sprintf("pgbench TPC-B s=%d c=%d", s.pgbenchScale, s.pgbenchClients)
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("ORDERS_BENCH_LOG"))); err != nil || os.Getenv("ORDERS_BENCH_LOG") == "" {
		return slog.LevelWarn
	}
	return l
}

// ---- the run ----

func run(log *slog.Logger) (string, error) {
	st, err := loadSettings()
	if err != nil {
		return "", err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "orders bench: "+format+"\n", args...) }

	dsn, dbName, drop, err := benchDatabase(ctx, say)
	if err != nil {
		return "", err
	}
	defer drop()

	// The reference first, on the idle database and machine.
	tps, err := runPgbench(ctx, st, dsn, say)
	if err != nil {
		return "", err
	}
	refP99, err := pgbenchHalfRate(ctx, st, dsn, tps/2, say)
	if err != nil {
		return "", err
	}

	p, err := startPipeline(ctx, st, dsn, log, say)
	if err != nil {
		return "", err
	}
	p.dbName = dbName
	defer p.stop(say)

	clients, err := p.setupAccounts(ctx, st, say)
	if err != nil {
		return "", err
	}
	gen := &generator{st: st, edge: p.edgeAddr, clients: clients, receivers: p.receivers, run: randomHex(4)}

	// Warm-up: connections, key caches, activation cache, plans. Not counted.
	if st.warmup > 0 {
		w := gen.closedLoop(ctx, st.warmup)
		say("warm-up: %d orders in %s, %d errors %s", w.ok, st.warmup, w.errors(), w.errorSummary())
		if w.ok == 0 {
			return "", fmt.Errorf("no order succeeded during the warm-up: %s", w.errorSummary())
		}
	}

	// Phase 1: closed loop.
	p.sqlStats.reset()
	p.procStats.reset()
	stopProfile, err := startProfile(st.cpuProfile, say)
	if err != nil {
		return "", err
	}
	advanced0, advancedAt0 := p.advanced(ctx), time.Now()
	cpu0, db0, be0 := sampleCPU(), p.dbStats(ctx), p.backendCPU(ctx, nil)
	waits := p.sampleWaits(ctx, st.duration)
	closed := gen.closedLoop(ctx, st.duration)
	cpu := sampleCPU().since(cpu0)
	be := p.backendCPU(ctx, be0)
	time.Sleep(600 * time.Millisecond) // backends report their statistics at most every 500 ms or so
	db := p.dbStats(ctx).minus(db0)
	stopProfile()
	rate := float64(closed.ok) / closed.elapsed.Seconds()
	say("closed loop: %d workers, %d accounts, %s: %d orders (%.0f orders/s), %d errors %s; latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms",
		st.workers, len(clients), closed.elapsed.Round(time.Millisecond), closed.ok, rate, closed.errors(), closed.errorSummary(),
		closed.pct(50), closed.pct(90), closed.pct(99), closed.pct(100))
	say("CPU during the closed loop: this process (edge, processor, relay, chainwatch, pricer, simulator, broker, load generator) %.2f cores, "+
		"the Postgres backends of the bench database %.2f cores (by stage: %s), whole machine %.2f of %d cores busy",
		cpu.self, be.cores(closed.elapsed), p.byStage(be, closed.elapsed), cpu.machine, runtime.NumCPU())
	if closed.ok > 0 {
		o := float64(closed.ok)
		say("database %s during the closed loop (all stages): %.1f commits, %.2f rollbacks, %.1f rows inserted, %.1f updated, %.1f deleted per order created; %.0f commits/s",
			p.dbName, float64(db.commits)/o, float64(db.rollbacks)/o, float64(db.inserted)/o, float64(db.updated)/o, float64(db.deleted)/o,
			float64(db.commits)/closed.elapsed.Seconds())
	}
	say("backends of the bench database, sampled every 20 ms during the closed loop: %s", <-waits)
	if p.sqlStats != nil {
		p.sqlStats.report("edge", "order", closed.ok, say)
	}
	if p.procStats != nil {
		p.procStats.report("order processor", "order that left created", int(p.advanced(ctx)-advanced0), say)
	}
	if err := closed.check(st.maxErrorRate, "closed loop"); err != nil {
		return "", err
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}

	// Phase 2: open loop at half the measured rate.
	half := rate / 2
	openProfile := ""
	if st.cpuProfile != "" {
		openProfile = st.cpuProfile + ".open"
	}
	if stopProfile, err = startProfile(openProfile, say); err != nil {
		return "", err
	}
	server0, group0 := p.serverBuckets(), p.histogram("rental_order_group_wait_seconds", nil)
	cpu0, be0 = sampleCPU(), p.backendCPU(ctx, nil)
	open := gen.openLoop(ctx, half, st.duration)
	cpu = sampleCPU().since(cpu0)
	be = p.backendCPU(ctx, be0)
	stopProfile()
	say("CPU during the open loop: this process %.2f cores, the Postgres backends of the bench database %.2f cores (by stage: %s), whole machine %.2f of %d cores busy",
		cpu.self, be.cores(open.elapsed), p.byStage(be, open.elapsed), cpu.machine, runtime.NumCPU())
	say("open loop, the edge's own time for POST /v1/orders (from its histogram): %s", p.serverBuckets().minus(server0))
	say("open loop, of which with the group commit (waiting for a committer and the group's transaction): %s",
		p.histogram("rental_order_group_wait_seconds", nil).minus(group0))
	openBySecond := open.bySecond() // before pct sorts the latencies
	say("open loop at %.0f orders/s (half rate), %s: %d orders (%.0f orders/s), %d errors %s; latency p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms",
		half, open.elapsed.Round(time.Millisecond), open.ok, float64(open.ok)/open.elapsed.Seconds(), open.errors(), open.errorSummary(),
		open.pct(50), open.pct(90), open.pct(99), open.pct(100))
	say("open loop p99 by second: %s", openBySecond)
	if err := open.check(st.maxErrorRate, "open loop"); err != nil {
		return "", err
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	p.pipelineProgress(say)
	say("order processor: %.0f orders/s left status created during both phases (the pipeline's pace; creation's was %.0f/s)",
		float64(p.advanced(ctx)-advanced0)/time.Since(advancedAt0).Seconds(), rate)

	verdict := "met"
	if rate < tps || open.pct(99) > 25 {
		verdict = "NOT met"
	}
	say("target (orders/s >= 1.0x TPC-B tps, p99 at half rate < 25 ms): %s; for the machine's latency: pgbench TPC-B's own p99 at half its rate was %.1f ms",
		verdict, refP99)
	return fmt.Sprintf("bench orders_create: %.0f orders/s, ratio %.2f vs %s (%.0f tps); p50 %.1f ms, p99 %.1f ms, p99 at half rate %.1f ms, ratio %.2f vs %s p99 at half its rate (%.1f ms)",
		rate, rate/tps, st.refName(), tps, closed.pct(50), closed.pct(99), open.pct(99), open.pct(99)/refP99, st.refName(), refP99), nil
}

// startProfile starts a CPU profile into path (none when path is empty); the function
// returned stops it.
func startProfile(path string, say func(string, ...any)) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		say("CPU profile written to %s", path)
	}, nil
}

// benchDatabase creates and migrates a database of our own on the configured server;
// drop removes it (call it whatever happens, once err is nil).
func benchDatabase(ctx context.Context, say func(string, ...any)) (dsn, dbName string, drop func(), err error) {
	base := os.Getenv("DATABASE_URL")
	if base == "" {
		base = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	dbName = fmt.Sprintf("bench_orders_%d", os.Getpid())
	if dsn, err = withDatabase(base, dbName); err != nil {
		return "", "", nil, err
	}
	if err := pg.EnsureDatabase(ctx, dsn); err != nil {
		return "", "", nil, err
	}
	drop = func() { dropDatabase(dsn, dbName, say) }
	if _, err := pg.Migrate(ctx, dsn); err != nil {
		drop()
		return "", "", nil, err
	}
	say("database %s created and migrated", dbName)
	return dsn, dbName, drop, nil
}

// withDatabase returns dsn with its database replaced by name.
func withDatabase(dsn, name string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("DATABASE_URL must be a postgres:// URL")
	}
	u.Path = "/" + name
	return u.String(), nil
}

// withParam returns dsn with one query parameter set.
func withParam(dsn, key, value string) string {
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func dropDatabase(dsn, name string, say func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		say("could not drop database %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		say("could not drop database %s: %v", name, err)
		return
	}
	say("database %s dropped", name)
}

// ---- pgbench ----

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \((without initial connection time|excluding connections establishing)\)`)

func runPgbench(ctx context.Context, st settings, dsn string, say func(string, ...any)) (float64, error) {
	conninfo := withParam(dsn, "application_name", "ordersbench-pgbench")
	ictx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	init := exec.CommandContext(ictx, st.pgbench, "-i", "-s", strconv.Itoa(st.pgbenchScale), "-q", conninfo)
	init.Stdout, init.Stderr = os.Stderr, os.Stderr
	if err := init.Run(); err != nil {
		return 0, fmt.Errorf("pgbench -i: %w (is pgbench installed? set PGBENCH)", err)
	}
	secs := int(math.Ceil(st.pgbenchTime.Seconds()))
	rctx, cancel2 := context.WithTimeout(ctx, st.pgbenchTime+time.Minute)
	defer cancel2()
	jobs := min(2, st.pgbenchClients)
	cmd := exec.CommandContext(rctx, st.pgbench, "-c", strconv.Itoa(st.pgbenchClients), "-j", strconv.Itoa(jobs),
		"-T", strconv.Itoa(secs), conninfo)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		os.Stderr.Write(out.Bytes())
		return 0, fmt.Errorf("pgbench: %w", err)
	}
	os.Stderr.Write(out.Bytes())
	m := tpsLine.FindStringSubmatch(out.String())
	if m == nil {
		return 0, errors.New("pgbench printed no tps line")
	}
	tps, err := strconv.ParseFloat(m[1], 64)
	if err != nil || tps <= 0 {
		return 0, fmt.Errorf("pgbench tps %q", m[1])
	}
	say("%s (%d threads, %ds): %.0f tps", st.refName(), jobs, secs, tps)
	return tps, nil
}

// pgbenchHalfRate runs pgbench TPC-B again, throttled to rate transactions/s (-R), and
// returns its p99 latency in ms from the per-transaction log: the machine's own answer to
// "p99 at half rate" for the reference workload. With -R pgbench measures each latency
// from the transaction's scheduled start, as the open loop does.
func pgbenchHalfRate(ctx context.Context, st settings, dsn string, rate float64, say func(string, ...any)) (float64, error) {
	conninfo := withParam(dsn, "application_name", "ordersbench-pgbench")
	dir, err := os.MkdirTemp("", "ordersbench-pgbench")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	secs := int(math.Ceil(st.pgbenchTime.Seconds()))
	rctx, cancel := context.WithTimeout(ctx, st.pgbenchTime+time.Minute)
	defer cancel()
	jobs := min(2, st.pgbenchClients)
	cmd := exec.CommandContext(rctx, st.pgbench, "-c", strconv.Itoa(st.pgbenchClients), "-j", strconv.Itoa(jobs),
		"-T", strconv.Itoa(secs), "-R", strconv.Itoa(max(1, int(rate))), "-l", "--log-prefix", filepath.Join(dir, "tx"), conninfo)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		os.Stderr.Write(out.Bytes())
		return 0, fmt.Errorf("pgbench -R: %w", err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "tx*"))
	var lat []float64
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			// client_id transaction_no time script_no time_epoch time_us schedule_lag
			if f := strings.Fields(line); len(f) >= 3 {
				if us, err := strconv.ParseFloat(f[2], 64); err == nil {
					lat = append(lat, us/1000)
				}
			}
		}
	}
	if len(lat) == 0 {
		return 0, errors.New("pgbench -R logged no transactions")
	}
	sort.Float64s(lat)
	at := func(p float64) float64 { return lat[min(len(lat)-1, int(float64(len(lat))*p/100))] }
	say("%s at half its rate (%d tps, %ds): %d transactions, latency p50 %.2f ms, p99 %.2f ms, max %.2f ms",
		st.refName(), int(rate), secs, len(lat), at(50), at(99), lat[len(lat)-1])
	return at(99), nil
}

// ---- the pipeline ----

type pipeline struct {
	cfg         config.Config
	holdProfile string // delivery mode: where the next hold writes a CPU profile of its window
	dbName      string
	edgeAddr    string
	receivers   []string
	pools       []*pgxpool.Pool
	setupPool   *pgxpool.Pool
	rdb         *redis.Client
	cancel      context.CancelFunc
	group       *errgroup.Group
	// infra is the broker and the simulator, stopped after the stages.
	// backendApps names the stage of each backend seen (pid -> application_name).
	backendApps struct {
		sync.Mutex
		m map[int]string
	}
	infraCancel context.CancelFunc
	infra       *errgroup.Group
	broker      *kafka.Broker
	sim         *tronsim.Sim
	dataDir     string
	sqlStats    *sqlStats
	procStats   *sqlStats // the order processor's pool
	reg         *prometheus.Registry
	closers     []func()
	// broadcasts is when the simulator first received each transaction (delivery mode).
	broadcasts *broadcastLog
	// nodeCalls counts the calls the simulator answered, by path.
	nodeCalls *nodeCalls
	// addStage starts one more stage (an order processor replica) in the running pipeline.
	addStage   func(name string) error
	processors int
}

// benchStakeTRX is the bench pool's energy stake: with the simulator's stake of the rest
// of the world it must hold more than settings.minSupplyOrders orders, so that every phase
// measures delivery and none runs the supply dry (5001); runDelivery prints what it holds
// and refuses a run it cannot supply.
const benchStakeTRX = 100_000_000_000

// benchPoolKey is the bench's stake pool: a fixed key, never used on a real chain.
func benchSignerKey() tron.PrivateKey {
	seed := sha256.Sum256([]byte("rental orders bench pool signer (bench only)"))
	return tron.PrivateKeyFromBytes(seed[:])
}

func benchPoolKey() tron.PrivateKey {
	seed := sha256.Sum256([]byte("rental orders bench stake pool (bench only)"))
	return tron.PrivateKeyFromBytes(seed[:])
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func startPipeline(parent context.Context, st settings, dsn string, log *slog.Logger, say func(string, ...any)) (p *pipeline, err error) {
	p = &pipeline{}
	defer func() {
		if err != nil {
			p.stop(say)
		}
	}()
	dataDir, err := os.MkdirTemp("", "ordersbench-")
	if err != nil {
		return p, err
	}
	p.dataDir = dataDir

	cfg, err := config.Load()
	if err != nil {
		return p, err
	}
	cfg.DatabaseURL = dsn
	cfg.DataDir = dataDir
	cfg.MetricsAddr = ""
	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		redisURL = "redis://127.0.0.1:6379/0"
	}
	ru, err := url.Parse(redisURL)
	if err != nil {
		return p, fmt.Errorf("REDIS_URL: %w", err)
	}
	ru.Path = "/" + strconv.Itoa(st.redisDB)
	cfg.RedisURL = ru.String()

	// Broker and simulator on free loopback ports.
	p.broker, err = kafka.StartBroker(kafka.BrokerOptions{Addr: "127.0.0.1:0", DataDir: dataDir + "/kafka", Logger: log})
	if err != nil {
		return p, err
	}
	// The pool's owner key stays in this set-up; the processor signs with a key holding
	// only its delegate permission, as in production (docs/custody.md).
	pool0, signer := benchPoolKey(), benchSignerKey()
	genesis := []tronsim.GenesisAccount{{
		Address:        pool0.Address(),
		BalanceSun:     10_000_000 * 1_000_000,
		StakeEnergySun: benchStakeTRX * 1_000_000, // see benchStakeTRX
	}, {Address: signer.Address(), BalanceSun: 10_000 * 1_000_000}}
	for range st.recvs {
		var b [20]byte
		_, _ = rand.Read(b[:])
		a, err := tron.AddressFromBytes(b[:])
		if err != nil {
			return p, err
		}
		genesis = append(genesis, tronsim.GenesisAccount{Address: a, BalanceSun: 1_000_000}) // activated
		p.receivers = append(p.receivers, a.String())
	}
	p.sim, err = tronsim.New(tronsim.Options{Network: cfg.Network, BlockInterval: st.blockInterval, Genesis: genesis, Logger: log})
	if err != nil {
		return p, err
	}
	simLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return p, err
	}

	cfg.KafkaBrokers = []string{p.broker.Addr()}
	cfg.TronNodeURL = "http://" + simLn.Addr().String()
	cfg.SimAddr = simLn.Addr().String()
	cfg.USDTContract = p.sim.USDTContract()
	if err := p.sim.GrantDelegates(pool0, signer.Address()); err != nil {
		return p, err
	}
	cfg.SignerKeys = []tron.PrivateKey{signer}
	cfg.PoolAddresses = []tron.Address{pool0.Address()}
	mk := sha256.Sum256([]byte("rental orders bench API key master key (bench only)"))
	cfg.Auth.MasterKey = mk[:]
	if d, err := deposits.NewDeriver(deposits.DevSeedHex); err == nil {
		cfg.Deposit.XPub = d.XPub() // the edge holds the public key only
	}
	cfg.Pricing.Providers = map[string]string{} // own pool only: no market provider to run
	cfg.Pricing.DeepContract = tron.Address{}
	cfg.Pricing.Every = time.Second
	cfg.ChainStartBlock = 0
	cfg.ChainPollEvery = 200 * time.Millisecond
	if st.confirmations > 0 {
		cfg.Confirmations = st.confirmations
	}
	cfg.ShutdownGrace = 3 * time.Second
	// The product's in-flight limit (MAX_IN_FLIGHT_ORDERS, 100) stays: with the default
	// 1,000 accounts the backlog the closed loop leaves is well under it per account.
	// The receiver ceiling (RECEIVER_MAX_ENERGY) stays at the product's default too.
	cfg.Ledger.Treasury = ""
	if cfg.HTTPAddr, err = freeAddr(); err != nil {
		return p, err
	}
	p.cfg, p.edgeAddr = cfg, cfg.HTTPAddr

	// One pool per stage, as when each runs as its own binary; the edge's is sized by
	// ORDERS_BENCH_EDGE_CONNS (pool_max_conns), the others as their binaries size them.
	ctx, cancel := context.WithCancel(parent)
	p.cancel = cancel
	connect := func(dsn, stage string, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
		// Named as the stage's binary names its connections (pg.ConnectStage), so that the
		// backends' CPU is told apart by stage.
		pc, err := pgxpool.ParseConfig(withParam(dsn, "application_name", "rental-"+stage))
		if err != nil {
			return nil, err
		}
		if tracer != nil {
			pc.ConnConfig.Tracer = tracer
		}
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, err
		}
		p.pools = append(p.pools, pool)
		return pool, pool.Ping(ctx)
	}
	var tracer pgx.QueryTracer
	if st.traceSQL {
		p.sqlStats = &sqlStats{}
		tracer = p.sqlStats
	}
	edgePool, err := connect(withParam(dsn, "pool_max_conns", strconv.Itoa(st.edgeConns)), "edge", tracer)
	if err != nil {
		return p, err
	}
	// A stage's pool is sized as its binary sizes it (stages.PoolConns).
	if st.traceSQL {
		p.procStats = &sqlStats{}
	}
	stagePool := func(binary string) (*pgxpool.Pool, error) {
		var t pgx.QueryTracer
		if binary == "orderflow" && p.procStats != nil {
			t = p.procStats
		}
		if binary == "orderflow" && st.processorConns > 0 {
			return connect(withParam(dsn, "pool_max_conns", strconv.Itoa(st.processorConns)), binary, t)
		}
		if n := stages.PoolConns[binary]; n > 0 {
			return connect(withParam(dsn, "pool_max_conns", strconv.Itoa(int(n))), binary, t)
		}
		return connect(dsn, binary, nil)
	}
	if p.setupPool, err = stagePool("bench"); err != nil {
		return p, err
	}
	p.rdb, err = redisx.Connect(ctx, cfg.RedisURL)
	if err != nil {
		return p, err
	}

	// The broker and the simulator stop after the stages that use them.
	ictx, icancel := context.WithCancel(parent)
	p.infraCancel = icancel
	ig, igctx := errgroup.WithContext(ictx)
	p.infra = ig
	ig.Go(func() error { return p.broker.Run(igctx) })
	p.broadcasts = newBroadcastLog()
	p.nodeCalls = newNodeCalls()
	ig.Go(func() error { return serveSim(igctx, p.sim, simLn, p.broadcasts, p.nodeCalls) })
	g, gctx := errgroup.WithContext(ctx)
	p.group = g
	producer, err := stages.KafkaProducer(gctx, cfg)
	if err != nil {
		return p, err
	}
	p.closers = append(p.closers, producer.Close)
	reg := metrics.NewRegistry()
	p.reg = reg
	type build func(pool *pgxpool.Pool) (stages.Runner, error)
	builds := []struct {
		name string
		b    build
	}{
		{"relay", func(pool *pgxpool.Pool) (stages.Runner, error) {
			return relaystage.Relay(cfg, pool, producer, log, reg)
		}},
		{"chainwatch", func(pool *pgxpool.Pool) (stages.Runner, error) { return chainstage.Chainwatch(cfg, pool, log, reg) }},
		{"pricer", func(pool *pgxpool.Pool) (stages.Runner, error) {
			return pricerstage.Pricer(cfg, pool, p.rdb, producer, log, reg)
		}},
		{"orderflow", func(pool *pgxpool.Pool) (stages.Runner, error) { return orderflowstage.Processor(cfg, pool, log, reg) }},
	}
	if st.noProcessor {
		builds = builds[:len(builds)-1]
		say("diagnostic run: ORDERS_BENCH_PROCESSOR=off, orders stay created")
	}
	byName := map[string]build{}
	for _, b := range builds {
		byName[b.name] = b.b
	}
	// Each stage, and each order processor replica, has a pool of its own, as separate
	// binaries would.
	p.addStage = func(name string) error {
		pool, err := stagePool(name)
		if err != nil {
			return err
		}
		r, err := byName[name](pool)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if name == "orderflow" {
			p.processors++
		}
		g.Go(func() error { return r.Run(gctx) })
		return nil
	}
	for _, b := range builds {
		n := 1
		if b.name == "orderflow" {
			n = st.processors
		}
		for range n {
			if err := p.addStage(b.name); err != nil {
				return p, err
			}
		}
	}
	api, err := edgestage.Edge(cfg, edgePool, p.rdb, log, reg)
	if err != nil {
		return p, fmt.Errorf("edge: %w", err)
	}
	g.Go(func() error { return api.Run(gctx) })

	// Ready when the edge serves a price snapshot from the pricer.
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body, err := fasthttp.GetTimeout(nil, "http://"+p.edgeAddr+"/v1/prices", 2*time.Second)
		if err == nil && code == fasthttp.StatusOK {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return p, fmt.Errorf("the pipeline did not come up in 60 s (GET /v1/prices: %d %s %v)", code, clip(body), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	say("pipeline up: edge http://%s, node %s, kafka %s, %d receivers", p.edgeAddr, cfg.TronNodeURL, p.broker.Addr(), len(p.receivers))
	return p, nil
}

// stop cancels every stage and waits for them a bounded time, then releases the rest.
func (p *pipeline) stop(say func(string, ...any)) {
	if p.cancel != nil {
		p.cancel()
	}
	wait := func(g *errgroup.Group, what string) {
		if g == nil {
			return
		}
		done := make(chan error, 1)
		go func() { done <- g.Wait() }()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				say("%s stopped with: %v", what, err)
			}
		case <-time.After(20 * time.Second):
			say("%s still stopping after 20 s; going on", what)
		}
	}
	wait(p.group, "a stage")
	if p.infraCancel != nil {
		p.infraCancel()
	}
	wait(p.infra, "the broker or the simulator")
	for _, c := range p.closers {
		c()
	}
	if p.rdb != nil {
		// The edge's keys ("rental:") and the pricer's snapshots ("pricing:").
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for _, pattern := range []string{"rental:*", "pricing:*"} {
			iter := p.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
			var batch []string
			for iter.Next(ctx) {
				if batch = append(batch, iter.Val()); len(batch) == 1000 {
					p.rdb.Del(ctx, batch...)
					batch = batch[:0]
				}
			}
			if len(batch) > 0 {
				p.rdb.Del(ctx, batch...)
			}
		}
		cancel()
		_ = p.rdb.Close()
	}
	for _, pool := range p.pools {
		pool.Close()
	}
	if p.sim != nil {
		_ = p.sim.Close()
	}
	if p.broker != nil {
		p.broker.Close()
	}
	if p.dataDir != "" {
		_ = os.RemoveAll(p.dataDir)
	}
	p.cancel, p.group, p.infraCancel, p.infra, p.closers, p.rdb, p.pools, p.sim, p.broker, p.dataDir = nil, nil, nil, nil, nil, nil, nil, nil, nil, ""
	say("pipeline stopped")
}

// advanced counts the orders the processor has taken beyond status created.
func (p *pipeline) advanced(ctx context.Context) int64 {
	var n int64
	_ = p.setupPool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status <> 'created'`).Scan(&n)
	return n
}

// pipelineProgress says how far the processor got with the orders (stderr only).
func (p *pipeline) pipelineProgress(say func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := p.setupPool.Query(ctx, `SELECT status, count(*) FROM orders GROUP BY status ORDER BY status`)
	if err != nil {
		return
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var s string
		var n int64
		if rows.Scan(&s, &n) == nil {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	say("orders by status at the end of the load: %s", strings.Join(parts, ", "))
}

type dbStats struct{ commits, rollbacks, inserted, updated, deleted int64 }

func (a dbStats) minus(b dbStats) dbStats {
	return dbStats{a.commits - b.commits, a.rollbacks - b.rollbacks, a.inserted - b.inserted, a.updated - b.updated, a.deleted - b.deleted}
}

// dbStats reads the bench database's counters (pg_stat_database).
func (p *pipeline) dbStats(ctx context.Context) dbStats {
	var s dbStats
	_ = p.setupPool.QueryRow(ctx, `SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&s.commits, &s.rollbacks, &s.inserted, &s.updated, &s.deleted)
	return s
}

// sampleWaits samples what the bench database's backends (other than the sampler) are doing
// every 20 ms for d: running (CPU), idle in transaction (waiting for the client), or the
// wait event. The summary arrives on the channel at the end.
func (p *pipeline) sampleWaits(ctx context.Context, d time.Duration) <-chan string {
	out := make(chan string, 1)
	go func() {
		counts := map[string]int{}
		total := 0
		end := time.Now().Add(d)
		for time.Now().Before(end) && ctx.Err() == nil {
			rows, err := p.setupPool.Query(ctx, `SELECT CASE
					WHEN state = 'idle in transaction' THEN 'idle in transaction (client round trip)'
					WHEN state = 'active' AND wait_event IS NULL THEN 'active, on CPU'
					WHEN state = 'active' THEN 'active, wait ' || wait_event_type || ':' || wait_event
					ELSE state END
				FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
					AND state IS NOT NULL AND state <> 'idle'`)
			if err == nil {
				for rows.Next() {
					var k string
					if rows.Scan(&k) == nil {
						counts[k]++
						total++
					}
				}
				rows.Close()
			}
			time.Sleep(20 * time.Millisecond)
		}
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%.0f%% %s", 100*float64(counts[k])/float64(max(total, 1)), k))
		}
		out <- strings.Join(parts, ", ")
	}()
	return out
}

// backendTimes is the CPU time (clock ticks) of each backend serving the bench database.
type backendTimes map[int]int64

// backendCPU reads the CPU time of the bench database's backends (/proc, same machine).
// Given an earlier reading it returns the difference; a backend not in that reading was
// started since (a pool grew under load), so all of its time counts. A backend that ended
// in between is not counted.
func (p *pipeline) backendCPU(ctx context.Context, before backendTimes) backendTimes {
	out := backendTimes{}
	rows, err := p.setupPool.Query(ctx, `SELECT pid, coalesce(nullif(application_name, ''), backend_type) FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return out
	}
	apps := map[int32]string{}
	pids, _ := pgx.CollectRows(rows, func(r pgx.CollectableRow) (int32, error) {
		var pid int32
		var app string
		err := r.Scan(&pid, &app)
		apps[pid] = strings.TrimPrefix(app, "rental-")
		return pid, err
	})
	p.backendApps.Lock()
	if p.backendApps.m == nil {
		p.backendApps.m = map[int]string{}
	}
	for pid, app := range apps {
		p.backendApps.m[int(pid)] = app
	}
	p.backendApps.Unlock()
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[int(pid)] = ut + st
	}
	if before == nil {
		return out
	}
	diff := backendTimes{}
	for pid, t := range out {
		diff[pid] = t - before[pid]
	}
	return diff
}

// byStage is the backends' CPU in cores by the stage their connections belong to
// (application_name), busiest first.
func (p *pipeline) byStage(b backendTimes, wall time.Duration) string {
	p.backendApps.Lock()
	ticks := map[string]int64{}
	for pid, t := range b {
		app := p.backendApps.m[pid]
		if app == "" {
			app = "other"
		}
		ticks[app] += t
	}
	p.backendApps.Unlock()
	names := make([]string, 0, len(ticks))
	for n := range ticks {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return ticks[names[i]] > ticks[names[j]] })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.2f", n, float64(ticks[n])/100/wall.Seconds())
	}
	return strings.Join(parts, ", ")
}

func (b backendTimes) cores(wall time.Duration) float64 {
	var t int64
	for _, v := range b {
		t += v
	}
	return float64(t) / 100 / wall.Seconds() // USER_HZ is 100 on Linux
}

// ---- accounts ----

type client struct {
	keyID, secret string
	hc            *fasthttp.HostClient
}

// setupAccounts creates the accounts, an orders.write key each, credits each through the
// ledger (a support adjustment) and gives each its own loopback source address.
func (p *pipeline) setupAccounts(ctx context.Context, st settings, say func(string, ...any)) ([]*client, error) {
	store, err := accounts.New(p.setupPool, accounts.Options{MasterKey: p.cfg.Auth.MasterKey})
	if err != nil {
		return nil, err
	}
	led, err := ledgerstage.Ledger(p.cfg, p.setupPool)
	if err != nil {
		return nil, err
	}
	clients := make([]*client, st.accts)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range clients {
		g.Go(func() error {
			var b [20]byte
			_, _ = rand.Read(b[:])
			owner, err := tron.AddressFromBytes(b[:])
			if err != nil {
				return err
			}
			a, _, err := store.CreateOrGetByOwner(gctx, p.cfg.Network, owner, nil, nil)
			if err != nil {
				return err
			}
			k, err := store.CreateKey(gctx, a.ID, accounts.NewKey{Scopes: []string{scopes.OrdersWrite}}, "ordersbench")
			if err != nil {
				return err
			}
			err = pgx.BeginFunc(gctx, p.setupPool, func(tx pgx.Tx) error {
				_, err := led.Credit(gctx, tx, ledgerstore.Credit{AccountID: a.ID, Kind: ledger.KindAdjustment,
					Ref: "ordersbench-fund-" + a.ID, AmountSun: 1_000_000 * 1_000_000}) // 1,000,000 TRX
				return err
			})
			if err != nil {
				return err
			}
			src := &net.TCPAddr{IP: net.IPv4(127, 1, byte(i/250), byte(i%250+1))}
			d := &net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}
			clients[i] = &client{keyID: k.ID, secret: k.Secret, hc: &fasthttp.HostClient{
				Addr:         p.edgeAddr,
				Dial:         func(addr string) (net.Conn, error) { return d.Dial("tcp4", addr) },
				MaxConns:     1024,
				ReadTimeout:  10 * time.Second,
				WriteTimeout: 10 * time.Second,
			}}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("creating accounts: %w", err)
	}
	say("%d accounts with an orders.write key, each credited 1,000,000 TRX, each on its own source address", len(clients))
	return clients, nil
}

// ---- load ----

type generator struct {
	st        settings
	edge      string
	clients   []*client
	receivers []string
	run       string
	seq       atomic.Int64
	recv      atomic.Int64
}

type result struct {
	ok      int
	lat     []float64 // ms, of the 201 answers
	at      []float64 // open loop: seconds from the start at which each of lat was scheduled
	errs    map[string]int
	elapsed time.Duration
}

func (r *result) merge(o *result) {
	r.ok += o.ok
	r.lat = append(r.lat, o.lat...)
	for k, v := range o.errs {
		if r.errs == nil {
			r.errs = map[string]int{}
		}
		r.errs[k] += v
	}
}

func (r *result) errors() int {
	n := 0
	for _, v := range r.errs {
		n += v
	}
	return n
}

func (r *result) errorSummary() string {
	if len(r.errs) == 0 {
		return ""
	}
	keys := make([]string, 0, len(r.errs))
	for k := range r.errs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return r.errs[keys[i]] > r.errs[keys[j]] })
	var parts []string
	for i, k := range keys {
		if i == 5 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, fmt.Sprintf("%dx %s", r.errs[k], k))
	}
	return "(" + strings.Join(parts, "; ") + ")"
}

func (r *result) pct(p float64) float64 {
	if len(r.lat) == 0 {
		return math.NaN()
	}
	if !slices.IsSorted(r.lat) {
		slices.Sort(r.lat)
	}
	i := int(math.Ceil(p/100*float64(len(r.lat)))) - 1
	return r.lat[max(0, min(i, len(r.lat)-1))]
}

// bySecond is the p99 and max of each second of an open loop (before pct sorts lat).
func (r *result) bySecond() string {
	if len(r.at) != len(r.lat) {
		return "n/a"
	}
	var buckets [][]float64
	for i, a := range r.at {
		b := int(a)
		for len(buckets) <= b {
			buckets = append(buckets, nil)
		}
		buckets[b] = append(buckets[b], r.lat[i])
	}
	var parts []string
	for i, b := range buckets {
		x := &result{lat: b}
		parts = append(parts, fmt.Sprintf("%ds %.0f/%.0f", i, x.pct(99), x.pct(100)))
	}
	return strings.Join(parts, ", ") + " (p99/max ms)"
}

func (r *result) check(maxRate float64, phase string) error {
	total := r.ok + r.errors()
	if total == 0 {
		return fmt.Errorf("%s: no request completed", phase)
	}
	if rate := float64(r.errors()) / float64(total); rate > maxRate {
		return fmt.Errorf("%s: %d of %d requests failed (%.2f %%, limit %.0f %%) %s", phase, r.errors(), total, 100*rate, 100*maxRate, r.errorSummary())
	}
	return nil
}

var errCode = regexp.MustCompile(`"code"\s*:\s*([0-9]+)`)

// one sends one signed order with client c and reports the outcome; ok is a 201.
func (g *generator) one(c *client, req *fasthttp.Request, resp *fasthttp.Response) (ok bool, errKey string) {
	n := g.seq.Add(1)
	recv := g.receivers[int(g.recv.Add(1))%len(g.receivers)]
	body := fmt.Appendf(nil, `{"client_order_id":"bench-%s-%d","resource":"energy","amount":%d,"tier":"%s","receiver":"%s"}`,
		g.run, n, g.st.orderEnergy, g.st.orderTier, recv)
	h := reqsign.Headers(c.keyID, c.secret, time.Now(), "POST", "/v1/orders", body)
	req.Reset()
	resp.Reset()
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://" + g.edge + "/v1/orders")
	req.Header.SetContentType("application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	req.SetBody(body)
	if err := c.hc.Do(req, resp); err != nil {
		return false, "transport: " + err.Error()
	}
	if resp.StatusCode() == fasthttp.StatusCreated {
		return true, ""
	}
	code := ""
	if m := errCode.FindSubmatch(resp.Body()); m != nil {
		code = " code " + string(m[1])
	}
	return false, fmt.Sprintf("HTTP %d%s", resp.StatusCode(), code)
}

// closedLoop runs st.workers workers for d; worker w uses accounts w, w+workers, ... in turn.
func (g *generator) closedLoop(ctx context.Context, d time.Duration) *result {
	workers := g.st.workers
	results := make([]*result, workers)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &result{errs: map[string]int{}}
			results[w] = r
			var mine []*client
			for i := w; i < len(g.clients); i += workers {
				mine = append(mine, g.clients[i])
			}
			if len(mine) == 0 {
				mine = []*client{g.clients[w%len(g.clients)]}
			}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for i := 0; ; i++ {
				t0 := time.Now()
				if !t0.Before(end) || ctx.Err() != nil {
					return
				}
				ok, key := g.one(mine[i%len(mine)], req, resp)
				if ok {
					r.ok++
					r.lat = append(r.lat, float64(time.Since(t0).Microseconds())/1000)
				} else {
					r.errs[key]++
				}
			}
		}()
	}
	wg.Wait()
	total := &result{errs: map[string]int{}, elapsed: time.Since(start)}
	for _, r := range results {
		total.merge(r)
	}
	return total
}

// openLoop sends orders at rate per second for d, each at its scheduled time whatever the
// answers before it, and measures each from its scheduled time.
func (g *generator) openLoop(ctx context.Context, rate float64, d time.Duration) *result {
	total := &result{errs: map[string]int{}}
	if rate <= 0 {
		return total
	}
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d / interval)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4096)
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			ok, key := g.one(g.clients[i%len(g.clients)], req, resp)
			lat := float64(time.Since(at).Microseconds()) / 1000
			mu.Lock()
			defer mu.Unlock()
			if ok {
				total.ok++
				total.lat = append(total.lat, lat)
				total.at = append(total.at, at.Sub(start).Seconds())
			} else {
				total.errs[key]++
			}
		}()
	}
	wg.Wait()
	total.elapsed = time.Since(start)
	return total
}

// ---- SQL statements of the edge (ORDERS_BENCH_TRACE_SQL=1) ----

type sqlStats struct {
	mu    sync.Mutex
	stats map[string]*sqlStat
}

type sqlStat struct {
	n          int // round trips
	statements int
	total      time.Duration
}

type traceKey struct{}

type traceStart struct {
	sql string
	at  time.Time
}

func (s *sqlStats) reset() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.stats = map[string]*sqlStat{}
	s.mu.Unlock()
}

var spaces = regexp.MustCompile(`\s+`)

func (s *sqlStats) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{}, traceStart{sql: d.SQL, at: time.Now()})
}

func (s *sqlStats) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	ts, ok := ctx.Value(traceKey{}).(traceStart)
	if !ok {
		return
	}
	s.add(ts.sql, time.Since(ts.at), 1)
}

// Batches (pgx.Batch: several statements in one round trip) are recorded as one entry
// named after their statements.
type batchKey struct{}

type batchTrace struct {
	at   time.Time
	sqls []string
}

func (s *sqlStats) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, batchKey{}, &batchTrace{at: time.Now()})
}

func (s *sqlStats) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if bt, ok := ctx.Value(batchKey{}).(*batchTrace); ok {
		sql := spaces.ReplaceAllString(strings.TrimSpace(d.SQL), " ")
		if len(sql) > 40 {
			sql = sql[:40]
		}
		bt.sqls = append(bt.sqls, sql)
	}
}

func (s *sqlStats) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	bt, ok := ctx.Value(batchKey{}).(*batchTrace)
	if !ok {
		return
	}
	s.add("[batch of "+strconv.Itoa(len(bt.sqls))+"] "+strings.Join(bt.sqls, " | "), time.Since(bt.at), len(bt.sqls))
}

func (s *sqlStats) add(sql string, el time.Duration, statements int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stats == nil {
		s.stats = map[string]*sqlStat{}
	}
	st := s.stats[sql]
	if st == nil {
		st = &sqlStat{}
		s.stats[sql] = st
	}
	st.n++
	st.statements += statements
	st.total += el
}

func (s *sqlStats) report(who, per string, orders int, say func(string, ...any)) {
	if s == nil || orders == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	type row struct {
		sql string
		st  *sqlStat
	}
	var rows []row
	var n int
	var total time.Duration
	merged := map[string]*sqlStat{}
	for k, v := range s.stats {
		sql := spaces.ReplaceAllString(strings.TrimSpace(k), " ")
		if len(sql) > 90 && !strings.HasPrefix(sql, "[batch") {
			sql = sql[:90]
		}
		m := merged[sql]
		if m == nil {
			m = &sqlStat{}
			merged[sql] = m
		}
		m.n += v.n
		m.statements += v.statements
		m.total += v.total
	}
	var statements int
	for k, v := range merged {
		rows = append(rows, row{k, v})
		n += v.n
		statements += v.statements
		total += v.total
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].st.total > rows[j].st.total })
	say("%s SQL: %.1f round trips (%.1f statements) per %s, %.2f ms of round-trip time per %s",
		who, float64(n)/float64(orders), float64(statements)/float64(orders), per, float64(total.Microseconds())/1000/float64(orders), per)
	for _, r := range rows {
		say("  %6.2f/%s  avg %6.2f ms  %s", float64(r.st.n)/float64(orders), per, float64(r.st.total.Microseconds())/1000/float64(r.st.n), r.sql)
	}
}

// ---- CPU use ----

type cpuSample struct {
	at          time.Time
	self        time.Duration // user + system time of this process
	busy, total int64         // jiffies of the whole machine (/proc/stat)
}

type cpuUse struct{ self, machine float64 } // cores

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now()}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			if i < 8 { // user nice system idle iowait irq softirq steal
				s.total += n
				if i != 3 && i != 4 {
					s.busy += n
				}
			}
		}
	}
	return s
}

func (s cpuSample) since(a cpuSample) cpuUse {
	wall := s.at.Sub(a.at).Seconds()
	u := cpuUse{self: (s.self - a.self).Seconds() / wall}
	if dt := s.total - a.total; dt > 0 {
		u.machine = float64(s.busy-a.busy) / float64(dt) * float64(runtime.NumCPU())
	}
	return u
}

// ---- helpers ----

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

func clip(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// buckets is a cumulative latency histogram: upper bound in seconds -> count.
type buckets map[float64]uint64

// serverBuckets reads the edge's duration histogram of POST /v1/orders.
func (p *pipeline) serverBuckets() buckets {
	return p.histogram("rental_http_request_duration_seconds", map[string]string{"route": "/v1/orders", "method": "POST"})
}

// histogram reads the buckets of the named histogram's series with labels (all of them
// summed when labels is nil).
func (p *pipeline) histogram(name string, labels map[string]string) buckets {
	out := buckets{}
	mfs, err := p.reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue series
				}
			}
			for _, b := range m.GetHistogram().GetBucket() {
				out[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
	}
	return out
}

// minus is the share of requests within each bound since b0, as text.
func (b buckets) minus(b0 buckets) string {
	bounds := make([]float64, 0, len(b))
	for k := range b {
		bounds = append(bounds, k)
	}
	sort.Float64s(bounds)
	var total uint64
	if len(bounds) > 0 {
		total = b[bounds[len(bounds)-1]] - b0[bounds[len(bounds)-1]]
	}
	if total == 0 {
		return "no requests"
	}
	var parts []string
	for _, k := range bounds {
		if k > 0.1 {
			break
		}
		parts = append(parts, fmt.Sprintf("%.1f%% within %g ms", 100*float64(b[k]-b0[k])/float64(total), k*1000))
	}
	return strings.Join(parts, ", ")
}
