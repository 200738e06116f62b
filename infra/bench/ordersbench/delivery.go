package main

// Delivery mode (ORDERS_BENCH_MODE=delivery, infra/bench/orders.sh delivery): the same
// pipeline, accounts and signed orders as orders_create, with simulated blocks at a
// realistic interval (ORDERS_BENCH_BLOCK_INTERVAL, default 3 s), measuring what reaches the
// chain rather than what is accepted:
//
//  1. Capacity, in two parts. A search brackets it: an open loop at
//     ORDERS_BENCH_DELIVERY_RATE orders/s (default 50) for ORDERS_BENCH_DURATION, doubled
//     while delivery keeps up (delegations broadcast at >= 90 % of the accepted rate; halved
//     down to minSearchRate while even the first rate is not kept up with), then
//     bisected twice between the last rate kept up with and the first one that was not;
//     its candidate is the most delegations broadcast per second over a step's last four
//     fifths among the steps kept up with. A search step is shorter than the confirmation
//     depth, so it never carries the confirmations of its own orders: the candidate is then
//     held (sustain) for the confirmation depth plus two block intervals plus one
//     ORDERS_BENCH_DURATION, and measured over that last ORDERS_BENCH_DURATION only, when
//     the hold's first orders are being confirmed while new ones arrive. The rate holds
//     when both the delegations broadcast and the orders confirmed in that window reach
//     90 % of the orders accepted in it; otherwise the hold is repeated at 90 % of the
//     lowest of the rate offered, the delegations broadcast per second over the whole hold,
//     and the mean of the window's broadcast and confirmation rates (at most three holds);
//     a retry that holds is followed by one hold halfway to the rate that did not. The
//     sustained delivery capacity is the lower of the window's delegations broadcast and
//     orders accepted per second, of the highest hold that held. Between steps the
//     backlog drains; before a hold every earlier order is also confirmed and the tables
//     vacuumed (as autovacuum would; the development server runs without it). Each line
//     on stderr has the CPU of this process and of the Postgres backends by stage.
//  2. Half capacity: an open loop at half that for ORDERS_BENCH_DURATION, then per order
//     accept (orders.created_at) -> delegation broadcast (the simulator's receipt of the
//     transaction) and accept -> confirmed (the order turned active), waiting for the
//     confirmations of the last order.
//  3. Replicas: ORDERS_BENCH_PROCESSORS replicas run from the start (default 1); with
//     ORDERS_BENCH_MORE_PROCESSORS (default 1) the capacity search runs again after as many
//     more replicas joined (each with its own pool, as separate binaries), on stderr.
//
// Stdout gets exactly one line:
//
//	bench orders_delivered: V orders/s, ratio R vs pgbench TPC-B s=S c=C (T tps); accept→broadcast p50 A ms, p99 B ms; accept→confirmed p99 C ms at half capacity; block interval I ms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"rental/infra/tronsim"
)

// broadcastLog records when the simulator first received each transaction.
type broadcastLog struct {
	mu sync.Mutex
	at map[string]time.Time
}

func newBroadcastLog() *broadcastLog { return &broadcastLog{at: map[string]time.Time{}} }

func (b *broadcastLog) record(txid string, t time.Time) {
	b.mu.Lock()
	if _, ok := b.at[txid]; !ok {
		b.at[txid] = t
	}
	b.mu.Unlock()
}

// between counts the transactions first received in [from, to).
func (b *broadcastLog) between(from, to time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, t := range b.at {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

func (b *broadcastLog) get(txid string) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.at[txid]
	return t, ok
}

// nodeCalls counts the node API calls by path.
type nodeCalls struct {
	mu sync.Mutex
	n  map[string]int64
}

func newNodeCalls() *nodeCalls { return &nodeCalls{n: map[string]int64{}} }

func (c *nodeCalls) add(path string) {
	c.mu.Lock()
	c.n[path]++
	c.mu.Unlock()
}

// take returns the counts so far and starts counting anew.
func (c *nodeCalls) take() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int64{}
	return n
}

// perOrder renders counts divided by orders, largest first.
func perOrder(n map[string]int64, orders int) string {
	paths := make([]string, 0, len(n))
	var total int64
	for p, v := range n {
		paths = append(paths, p)
		total += v
	}
	slices.SortFunc(paths, func(a, b string) int { return int(n[b] - n[a]) })
	out := fmt.Sprintf("%.2f in all", float64(total)/float64(orders))
	for _, p := range paths {
		out += fmt.Sprintf(", %s %.2f", p, float64(n[p])/float64(orders))
	}
	return out
}

// serveSim is tronsim's ServeListener with the broadcasts recorded on their way in and
// the calls counted by path.
func serveSim(ctx context.Context, sim *tronsim.Sim, ln net.Listener, log *broadcastLog, calls *nodeCalls) error {
	h := sim.Handler()
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.add(r.URL.Path)
		if r.URL.Path == "/wallet/broadcasttransaction" {
			body, err := io.ReadAll(r.Body)
			if err == nil {
				var tx struct {
					TxID string `json:"txID"`
				}
				if json.Unmarshal(body, &tx) == nil && tx.TxID != "" {
					log.record(tx.TxID, time.Now())
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	})}
	errc := make(chan error, 2)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			return
		}
		errc <- nil
	}()
	go func() { errc <- sim.Run(ctx) }()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-errc
	<-errc
	return nil
}

// backlog is the orders accepted and not yet broadcast (what orderstore.Backlog counts).
func (p *pipeline) backlog(ctx context.Context) int64 {
	var n int64
	_ = p.setupPool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status IN ('created', 'paid', 'allocating')`).Scan(&n)
	return n
}

// vacuum does what autovacuum does between phases: the development server runs with it
// off (.ci's configuration), and without it every order's updates leave dead rows and
// index entries that later phases would wade through, which no deployment does.
func (p *pipeline) vacuum(ctx context.Context, say func(string, ...any)) {
	if _, err := p.setupPool.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		say("VACUUM failed: %v; going on", err)
	}
}

// drain waits until the backlog is empty, at most within.
func (p *pipeline) drain(ctx context.Context, within time.Duration, say func(string, ...any)) {
	end := time.Now().Add(within)
	for n := p.backlog(ctx); n > 0; n = p.backlog(ctx) {
		if time.Now().After(end) || ctx.Err() != nil {
			say("backlog still %d orders after %s; going on", n, within)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// capacity is the sustained delivery capacity: the search's candidate, held (see the file
// comment). held is false when no hold held; the figure is then the last hold's. An open
// loop with more than st.maxErrorRate errors is an error: the phase measured refusals, not
// delivery.
func (p *pipeline) capacity(ctx context.Context, st settings, gen *generator, start float64, say func(string, ...any)) (rate float64, held bool, err error) {
	rate, err = p.search(ctx, st, gen, start, say)
	if err != nil || rate <= 0 {
		return 0, false, err
	}
	say("search with %d processor(s): candidate %.0f orders/s (short steps, without their own confirmations); holding it", p.processors, rate)
	holdAt := func(rate float64) (hold, error) {
		// A hold starts from nothing in flight: the confirmations of earlier steps would
		// otherwise run inside its window and count against it.
		p.drain(ctx, 3*time.Minute, say)
		w := time.Now()
		p.waitConfirmed(ctx, time.Time{}, w, 5*time.Minute)
		p.vacuum(ctx, say)
		say("before the hold: every earlier order delivered and confirmed, the tables vacuumed (%s)", time.Since(w).Round(time.Second))
		return p.sustain(ctx, st, gen, rate, say)
	}
	last, failed := 0.0, 0.0
	for try := 0; try < 3 && ctx.Err() == nil; try++ {
		h, err := holdAt(rate)
		if err != nil {
			return 0, false, err
		}
		last = min(h.broadcast, h.accepted)
		if h.held() {
			// The retry's rate is an estimate below the failed one: one more hold halfway
			// between them narrows the capacity down.
			if mid := (rate + failed) / 2; failed > 0 && mid > 1.03*rate && ctx.Err() == nil {
				m, err := holdAt(mid)
				if err != nil {
					return 0, false, err
				}
				if m.held() {
					last = max(last, min(m.broadcast, m.accepted))
				}
			}
			return last, true, nil
		}
		failed = rate
		// Past the confirmation depth delivery and confirmation share the machine: the
		// mean of the two rates in the window estimates what both can keep up.
		rate = 0.9 * min(rate, h.whole, (h.broadcast+h.confirmed)/2)
	}
	say("NOT HELD: no hold held; the figure is the last hold's")
	return last, false, ctx.Err()
}

// notHeld carries the bench line of a delivery run in which no hold held: printed marked,
// and the run fails.
type notHeld struct{ line string }

func (n notHeld) Error() string { return n.line }

// sayStock prints what the run can sell before it starts, and refuses a run whose supply
// (the pool's energy, the receivers' ceiling) could run out before its phases end: each
// phase must measure delivery, not stock.
func (p *pipeline) sayStock(st settings, say func(string, ...any)) error {
	a, ok := p.sim.Account(benchPoolKey().Address())
	if !ok {
		return errors.New("the bench pool is not on the simulated chain")
	}
	perOrder := st.orderEnergy
	poolOrders := a.EnergyLimit / perOrder
	recvOrders := int64(len(p.receivers)) * (p.cfg.Orders.ReceiverMaxEnergy / perOrder)
	if p.cfg.Orders.ReceiverMaxEnergy == 0 {
		recvOrders = math.MaxInt64
	}
	say("supply: the pool holds %d energy (%d orders of %d), the receivers' ceiling allows %d orders", a.EnergyLimit, poolOrders, perOrder, recvOrders)
	if need := int64(st.minSupplyOrders); min(poolOrders, recvOrders) < need {
		return fmt.Errorf("supply for %d orders, fewer than the %d a run may accept: raise benchStakeTRX or ORDERS_BENCH_RECEIVERS", min(poolOrders, recvOrders), need)
	}
	return nil
}

// hold is what one sustained run measured over its window, per second.
type hold struct {
	accepted, broadcast, confirmed float64
	whole                          float64 // delegations broadcast per second over the whole hold
}

func (h hold) held() bool {
	return h.accepted > 0 && h.broadcast >= 0.9*h.accepted && h.confirmed >= 0.9*h.accepted
}

// sustain offers rate for the confirmation depth plus two block intervals plus one step,
// and measures the last step: orders accepted, delegations broadcast, and orders of the
// hold confirmed in it.
func (p *pipeline) sustain(ctx context.Context, st settings, gen *generator, rate float64, say func(string, ...any)) (hold, error) {
	warm := time.Duration(p.cfg.Confirmations+2) * st.blockInterval
	t0 := time.Now()
	ws, we := t0.Add(warm), t0.Add(warm+st.duration)
	var b0 int64
	sampled := make(chan struct{})
	profile := p.holdProfile
	p.holdProfile = ""
	go func() {
		defer close(sampled)
		select {
		case <-time.After(time.Until(ws)):
			b0 = p.backlog(ctx)
		case <-ctx.Done():
			return
		}
		if stop, err := startProfile(profile, say); err != nil {
			say("CPU profile: %v", err)
		} else {
			select {
			case <-time.After(time.Until(we)):
			case <-ctx.Done():
			}
			stop()
		}
	}()
	cpu0, be0 := sampleCPU(), p.backendCPU(ctx, nil)
	res := gen.openLoop(ctx, rate, warm+st.duration)
	cpu, be := sampleCPU().since(cpu0), p.backendCPU(ctx, be0)
	<-sampled
	b1 := p.backlog(ctx)
	var accepted, confirmed int64
	_ = p.setupPool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE created_at >= $1 AND created_at < $2),
			count(*) FILTER (WHERE status = 'active' AND updated_at >= $1 AND updated_at < $2)
		FROM orders WHERE created_at >= $3`, ws, we, t0).Scan(&accepted, &confirmed)
	secs := we.Sub(ws).Seconds()
	h := hold{accepted: float64(accepted) / secs, broadcast: float64(p.broadcasts.between(ws, we)) / secs, confirmed: float64(confirmed) / secs,
		whole: float64(p.broadcasts.between(t0, we)) / we.Sub(t0).Seconds()}
	verdict := "held"
	if !h.held() {
		verdict = "NOT held"
	}
	say("hold with %d processor(s) at %.0f orders/s offered for %s (%d errors %s), its last %s: %.0f accepted/s, %.0f delegations broadcast/s, %.0f confirmed/s (whole hold: %.0f broadcast/s); backlog %d -> %d: %s; "+
		"CPU: this process %.2f cores, Postgres %.2f (%s), machine %.2f of %d",
		p.processors, rate, res.elapsed.Round(time.Second), res.errors(), res.errorSummary(), st.duration, h.accepted, h.broadcast, h.confirmed, h.whole, b0, b1, verdict,
		cpu.self, be.cores(res.elapsed), p.byStage(be, res.elapsed), cpu.machine, runtime.NumCPU())
	return h, res.check(st.maxErrorRate, fmt.Sprintf("hold at %.0f orders/s", rate))
}

// minSearchRate is the lowest rate the search tries: below it, delivery is taken not to run.
const minSearchRate = 3.0

// search brackets the capacity with short steps and returns its candidate (see the file
// comment).
func (p *pipeline) search(ctx context.Context, st settings, gen *generator, start float64, say func(string, ...any)) (float64, error) {
	rate, best := start, 0.0
	lo, hi, halvings := 0.0, math.Inf(1), 0
	for step := 0; step < 12 && ctx.Err() == nil; step++ {
		p.drain(ctx, 3*time.Minute, say)
		b0 := p.backlog(ctx)
		t0 := time.Now()
		cpu0, be0 := sampleCPU(), p.backendCPU(ctx, nil)
		res := gen.openLoop(ctx, rate, st.duration)
		cpu, be := sampleCPU().since(cpu0), p.backendCPU(ctx, be0)
		from := t0.Add(st.duration / 5)
		delivered := float64(p.broadcasts.between(from, t0.Add(st.duration))) / t0.Add(st.duration).Sub(from).Seconds()
		accepted := float64(res.ok) / res.elapsed.Seconds()
		b1 := p.backlog(ctx)
		say("delivery with %d processor(s) at %.0f orders/s offered: %.0f accepted/s (%d errors %s), %.0f delegations broadcast/s; backlog %d -> %d; "+
			"CPU: this process %.2f cores, Postgres %.2f (%s), machine %.2f of %d",
			p.processors, rate, accepted, res.errors(), res.errorSummary(), delivered, b0, b1,
			cpu.self, be.cores(res.elapsed), p.byStage(be, res.elapsed), cpu.machine, runtime.NumCPU())
		if err := res.check(st.maxErrorRate, fmt.Sprintf("search step at %.0f orders/s", rate)); err != nil {
			return 0, err
		}
		if delivered >= 0.9*accepted {
			lo, best = rate, max(best, delivered)
		} else {
			hi = rate
		}
		switch {
		case math.IsInf(hi, 1):
			rate *= 2
		case lo == 0 && rate/2 >= minSearchRate:
			// Not even the first rate was kept up with (a busy machine): halve it until one
			// is, so that the capacity is measured rather than reported as none.
			rate /= 2
		case lo == 0 || halvings == 2:
			// Doubling brackets the capacity between the last rate kept up with and the
			// first one that was not; two bisections narrow it to an eighth of that gap.
			return best, nil
		default:
			rate, halvings = (lo+hi)/2, halvings+1
		}
	}
	return best, nil
}

// latencies are, in ms, each order's accept -> broadcast and accept -> confirmed (+Inf when
// it did not get there), of the orders created in [from, to).
func (p *pipeline) latencies(ctx context.Context, from, to time.Time) (broadcast, confirmed []float64, err error) {
	rows, err := p.setupPool.Query(ctx, `SELECT o.created_at, o.status, o.updated_at,
			(SELECT s.txid FROM signed_txs s WHERE s.order_id = o.id AND s.purpose = 'delegate' ORDER BY s.fill_seq, s.attempt LIMIT 1)
		FROM orders o WHERE o.created_at >= $1 AND o.created_at < $2`, from, to)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var created, updated time.Time
		var status string
		var txid *string
		if err := rows.Scan(&created, &status, &updated, &txid); err != nil {
			return nil, nil, err
		}
		b := math.Inf(1)
		if txid != nil {
			if t, ok := p.broadcasts.get(*txid); ok {
				b = float64(t.Sub(created).Microseconds()) / 1000
			}
		}
		c := math.Inf(1)
		if status == "active" {
			c = float64(updated.Sub(created).Microseconds()) / 1000
		}
		broadcast, confirmed = append(broadcast, b), append(confirmed, c)
	}
	return broadcast, confirmed, rows.Err()
}

// waitConfirmed waits until no order created in [from, to) is short of active, at most within.
func (p *pipeline) waitConfirmed(ctx context.Context, from, to time.Time, within time.Duration) {
	end := time.Now().Add(within)
	for time.Now().Before(end) && ctx.Err() == nil {
		var n int64
		_ = p.setupPool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE created_at >= $1 AND created_at < $2 AND status IN ('created', 'paid', 'allocating', 'delegated')`,
			from, to).Scan(&n)
		if n == 0 {
			return
		}
		time.Sleep(time.Second)
	}
}

func pctOf(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	if !slices.IsSorted(v) {
		slices.Sort(v)
	}
	i := int(math.Ceil(p/100*float64(len(v)))) - 1
	return v[max(0, min(i, len(v)-1))]
}

func runDelivery(log *slog.Logger) (string, error) {
	st, err := loadSettings()
	if err != nil {
		return "", err
	}
	startRate := 50.0
	if v := os.Getenv("ORDERS_BENCH_DELIVERY_RATE"); v != "" {
		if startRate, err = strconv.ParseFloat(v, 64); err != nil || startRate <= 0 {
			return "", errors.New("ORDERS_BENCH_DELIVERY_RATE: want a positive number of orders/s")
		}
	}
	more := 1
	if v := os.Getenv("ORDERS_BENCH_MORE_PROCESSORS"); v != "" {
		if more, err = strconv.Atoi(v); err != nil || more < 0 {
			return "", errors.New("ORDERS_BENCH_MORE_PROCESSORS: want 0 or more")
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "delivery bench: "+format+"\n", args...) }

	dsn, dbName, drop, err := benchDatabase(ctx, say)
	if err != nil {
		return "", err
	}
	defer drop()
	tps, err := runPgbench(ctx, st, dsn, say)
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
	if st.warmup > 0 {
		w := gen.openLoop(ctx, 20, st.warmup)
		if w.ok == 0 {
			return "", fmt.Errorf("no order succeeded during the warm-up: %s", w.errorSummary())
		}
	}
	depth := p.cfg.Confirmations
	say("block interval %s, confirmation depth %d, %d processor replica(s)", st.blockInterval, depth, p.processors)

	if err := p.sayStock(st, say); err != nil {
		return "", err
	}

	p.holdProfile = st.cpuProfile // the first hold's window
	capacity, held, err := p.capacity(ctx, st, gen, startRate, say)
	if err != nil {
		return "", err
	}
	if capacity <= 0 {
		return "", errors.New("no delegation was broadcast: delivery does not run")
	}
	replicas := p.processors
	say("sustained delivery capacity with %d processor(s): %.0f orders/s (%.3fx %s)", replicas, capacity, capacity/tps, st.refName())
	if !held {
		return "", notHeld{fmt.Sprintf("bench orders_delivered: NOT HELD (last hold %.0f orders/s), ratio %.2f vs %s (%.0f tps)",
			capacity, capacity/tps, st.refName(), tps)}
	}

	bl, cf, err := p.halfCapacity(ctx, st, gen, capacity/2, say)
	if err != nil {
		return "", err
	}
	interval := float64(st.blockInterval.Milliseconds())
	bp50, bp99, cp99 := pctOf(bl, 50), pctOf(bl, 99), pctOf(cf, 99)
	say("half capacity, %d orders: accept→broadcast p50 %.0f ms, p90 %.0f ms, p99 %.0f ms, max %.0f ms; accept→confirmed p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		len(bl), bp50, pctOf(bl, 90), bp99, pctOf(bl, 100), pctOf(cf, 50), cp99, pctOf(cf, 100))
	sayTargets(st, capacity, tps, bp99, cp99, interval, depth, say)

	if more > 0 && ctx.Err() == nil {
		if err := p.moreReplicas(ctx, st, gen, more, max(startRate, capacity/2), capacity, tps, say); err != nil {
			return "", err
		}
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	// Supply committed at acceptance (docs/orders.md): an order the supply cannot hold is
	// refused at creation (5001 among the errors above), never accepted and failed later.
	var lateShort int64
	_ = p.setupPool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status = 'failed' AND (failure->>'code')::int = 5001`).Scan(&lateShort)
	say("orders accepted and later failed with 5001 (insufficient supply), whole run: %d (target 0)", lateShort)
	if lateShort > 0 {
		return "", fmt.Errorf("%d orders accepted and later failed with 5001: the run's supply or its commitment at acceptance failed", lateShort)
	}
	return fmt.Sprintf("bench orders_delivered: %.0f orders/s, ratio %.2f vs %s (%.0f tps); accept→broadcast p50 %.0f ms, p99 %.0f ms; accept→confirmed p99 %.0f ms at half capacity; block interval %.0f ms",
		capacity, capacity/tps, st.refName(), tps, bp50, bp99, cp99, interval), nil
}

// halfCapacity offers half the capacity for one step and returns each order's accept ->
// broadcast and accept -> confirmed (ms): per-order latencies, and the database work and
// node calls per order from acceptance to confirmation; every earlier order is confirmed
// first, so that the work counted is the phase's own.
func (p *pipeline) halfCapacity(ctx context.Context, st settings, gen *generator, half float64, say func(string, ...any)) (broadcast, confirmed []float64, err error) {
	p.drain(ctx, 3*time.Minute, say)
	p.waitConfirmed(ctx, time.Time{}, time.Now(), time.Duration(p.cfg.Confirmations+10)*st.blockInterval+60*time.Second)
	p.vacuum(ctx, say)
	b0 := p.backlog(ctx)
	p.procStats.reset()
	p.nodeCalls.take()
	db0 := p.dbStats(ctx)
	t0 := time.Now()
	res := gen.openLoop(ctx, half, st.duration)
	t1 := time.Now()
	b1 := p.backlog(ctx)
	say("half capacity: %.0f orders/s offered, %d accepted, %d errors %s; backlog %d -> %d", half, res.ok, res.errors(), res.errorSummary(), b0, b1)
	if err := res.check(st.maxErrorRate, "half capacity"); err != nil {
		return nil, nil, err
	}
	p.waitConfirmed(ctx, t0, t1, time.Duration(p.cfg.Confirmations+10)*st.blockInterval+30*time.Second)
	bl, cf, err := p.latencies(ctx, t0, t1)
	if err != nil {
		return nil, nil, err
	}
	if res.ok > 0 {
		// Everything the database did from the first order of the phase to the last one's
		// confirmation (all stages: acceptance, relay, chainwatch, processor).
		db := p.dbStats(ctx).minus(db0)
		o := float64(res.ok)
		say("database during the half-capacity phase until its last confirmation (all stages): %.1f commits, %.1f rows inserted, %.1f updated per order",
			float64(db.commits)/o, float64(db.inserted)/o, float64(db.updated)/o)
		say("node calls during the half-capacity phase until its last confirmation (all stages), per order: %s", perOrder(p.nodeCalls.take(), res.ok))
	}
	if p.procStats != nil {
		p.procStats.report("order processor", "order delivered", res.ok, say)
	}
	return bl, cf, nil
}

// moreReplicas adds n order processor replicas, each with a pool of its own (as separate
// binaries), and searches and holds the capacity again from the rate from, on stderr.
func (p *pipeline) moreReplicas(ctx context.Context, st settings, gen *generator, n int, from, capacity, tps float64, say func(string, ...any)) error {
	replicas := p.processors
	for range n {
		if err := p.addStage("orderflow"); err != nil {
			return err
		}
	}
	time.Sleep(3 * time.Second) // the new consumers join the group
	c2, held2, err := p.capacity(ctx, st, gen, from, say)
	if err != nil {
		return err
	}
	mark := ""
	if !held2 {
		mark = " (NOT HELD: the last hold's)"
	}
	say("sustained delivery capacity with %d processors: %.0f orders/s%s (%.3fx %s); with %d: %.0f orders/s",
		p.processors, c2, mark, c2/tps, st.refName(), replicas, capacity)
	return nil
}

// sayTargets prints the delivery targets and whether the run met them.
func sayTargets(st settings, capacity, tps, bp99, cp99, interval float64, depth int, say func(string, ...any)) {
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	say("targets: capacity >= 0.25x %s: %s; accept→broadcast p99 < one block interval (%.0f ms): %s; accept→confirmed p99 <= (depth %d + 2) intervals (%.0f ms): %s",
		st.refName(), verdict(capacity >= 0.25*tps), interval, verdict(bp99 < interval), depth, float64(depth+2)*interval, verdict(cp99 <= float64(depth+2)*interval))
}
