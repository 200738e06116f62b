package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"rental/infra/ledgerstore"
	"rental/infra/stages/ledgerstage"
	"rental/infra/tronsim"
	"rental/schemas/orders"
)

type result struct {
	orders, faults int
	// ended: rentals that ended (expired) while faults were injected.
	ended int
	// delivered of deliverable: orders whose delegation landed, of the orders accepted less
	// those failed with 5002 after a fault that refused or lost their delegation (refused).
	delivered, deliverable, refused int
	findings                        map[string]int // by column (columns)
}

// columns are the checker's columns, in the last line's order.
var columns = []struct{ key, name string }{
	{"L", "lost"}, {"D", "duplicated"}, {"C", "charged twice"}, {"W", "charged wrong"},
	{"G", "delegated twice"}, {"S", "stuck"}, {"X", "unexpected exits"},
}

// minDelivered is the floor on delivered / deliverable: a run in which most orders failed
// and were refunded is not a pass, even with every other column at zero.
const minDelivered = 0.9

// bad is whether the run failed: any finding, or too little delivered.
func (r result) bad() bool {
	for _, c := range columns {
		if r.findings[c.key] > 0 {
			return true
		}
	}
	return r.deliverable > 0 && float64(r.delivered) < minDelivered*float64(r.deliverable)
}

// line is the soak's last line.
func (r result) line() string {
	pct := 100.0
	if r.deliverable > 0 {
		pct = 100 * float64(r.delivered) / float64(r.deliverable)
	}
	out := fmt.Sprintf("chaos: %d orders, %d faults, %d ended under faults, %.1f%% delivered (%d refused by faults)",
		r.orders, r.faults, r.ended, pct, r.refused)
	for _, c := range columns {
		out += fmt.Sprintf(", %d %s", r.findings[c.key], c.name)
	}
	return out
}

// finding is one broken invariant, reported on stderr under its column.
type findings struct {
	e    *env
	n    map[string]int
	seen map[string]int
}

func (f *findings) add(col, format string, args ...any) {
	f.n[col]++
	f.seen[col]++
	if f.seen[col] <= 20 {
		f.e.log.Error("invariant broken", "column", col, "detail", fmt.Sprintf(format, args...))
	}
}

// soak runs the load with the faults, settles and checks.
func (e *env) soak(ctx context.Context) (result, error) {
	var res result
	rec := &recorder{}
	accts, err := e.setupAccounts(ctx, rec)
	if err != nil {
		return res, fmt.Errorf("accounts: %w", err)
	}
	receivers, err := e.seedReceivers(ctx, e.st.receivers)
	if err != nil {
		return res, fmt.Errorf("receivers: %w", err)
	}
	e.log.Info("load ready", "accounts", len(accts), "receivers", len(receivers))

	began := time.Now()
	end := began.Add(e.st.duration)
	settleBy := end.Add(e.st.settle)
	clientCtx, cancelClients := context.WithDeadline(ctx, settleBy)
	defer cancelClients()
	l := &load{e: e, accts: accts, receivers: receivers, run: randomHex(4)}
	genDone := make(chan struct{})
	go func() { defer close(genDone); l.generate(ctx, clientCtx, end, e.st.rate) }()
	pay := e.startPayments(clientCtx, end) // payments.go
	faults, ferr := e.schedule(ctx, end)
	<-genDone
	if ferr != nil {
		return res, ferr
	}
	res.faults = len(faults)
	loadEnd := time.Now()
	e.log.Info("load over; waiting for every client to learn its outcome and for the pipeline to settle",
		"sent", len(l.snapshot()), "faults", len(faults), "clients_waiting", l.inFlight.Load())
	if err := e.disarmSim(ctx); err != nil {
		return res, err
	}
	waited := make(chan struct{})
	go func() { l.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-clientCtx.Done():
	}
	settled := e.settle(ctx, settleBy)
	e.log.Info("settled", "ok", settled, "after", time.Since(loadEnd).Round(time.Second))

	all := l.snapshot()
	f, err := e.check(ctx, l, all, receivers)
	if err != nil {
		return res, err
	}
	if err := e.checkPayments(ctx, f, pay); err != nil {
		return res, fmt.Errorf("checks of payments by transfer: %w", err)
	}
	for _, o := range all {
		if o.outcome == "created" {
			res.orders++
		}
	}
	if len(faults) > 0 {
		if res.ended, err = e.endedBetween(ctx, faults[0].start, faults[len(faults)-1].end); err != nil {
			return res, err
		}
	}
	if res.delivered, res.deliverable, res.refused, err = e.deliveredShare(ctx); err != nil {
		return res, err
	}
	e.summarise(ctx, all, faults, rec.attempts(), loadEnd, began)
	res.findings = f.n
	if e.st.plant {
		if err := e.plantAndCheck(ctx, l, receivers); err != nil {
			return res, fmt.Errorf("planted defects: %w", err)
		}
	}
	return res, nil
}

// check runs every check of the settled soak: from outside (the API), in the database and
// on chain; and counts the dev stack's exits the soak did not cause.
func (e *env) check(ctx context.Context, l *load, all []*order, receivers []string) (*findings, error) {
	f := &findings{e: e, n: map[string]int{}, seen: map[string]int{}}
	if err := e.checkOutside(ctx, f, l, all); err != nil {
		return nil, fmt.Errorf("checks from outside: %w", err)
	}
	if err := e.checkDB(ctx, f, all); err != nil {
		return nil, fmt.Errorf("checks in the database: %w", err)
	}
	if err := e.checkChain(ctx, f, receivers); err != nil {
		return nil, fmt.Errorf("checks on chain: %w", err)
	}
	if n := e.exits.Load() - e.killsSent.Load(); n > 0 {
		for range n {
			f.add("X", "the dev stack exited without the soak killing it (log %s)", e.stack.logPath)
		}
	}
	return f, nil
}

// endedBetween counts the rentals that ended at expiry in [from, to].
func (e *env) endedBetween(ctx context.Context, from, to time.Time) (int, error) {
	var n int
	err := e.db.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status = 'expired' AND ended_at BETWEEN $1 AND $2`, from, to).Scan(&n)
	return n, err
}

// deliveredShare counts the orders whose delegation landed, and the orders that could have
// been: every order less those failed with 5002 delegation_failed (the reject and drop
// faults refuse or lose their broadcasts; counted apart as refused).
func (e *env) deliveredShare(ctx context.Context) (delivered, deliverable, refused int, err error) {
	var all int
	err = e.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE delegated_at IS NOT NULL),
			count(*) FILTER (WHERE status = 'failed' AND (failure->>'code')::int = 5002)
		FROM orders`).Scan(&all, &delivered, &refused)
	return delivered, all - refused, refused, err
}

// inFlight counts what is not settled yet: orders in flight, journal transactions not
// settled, orders past their expiry not ended, events not yet published. Settling waits
// for every rental past its expiry to end (its undelegation in a block and in the
// database): a check that read the chain while an undelegation was between the two would
// count a receiver lost and an order stuck that are neither.
func (e *env) inFlight(ctx context.Context) (orders, journal, overdue, outbox int64, err error) {
	err = e.db.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM orders WHERE status IN ('created', 'paid', 'allocating', 'delegated')),
		(SELECT count(*) FROM signed_txs WHERE state IN ('signed', 'broadcast')),
		(SELECT count(*) FROM orders WHERE status IN ('confirmed', 'active') AND expires_at < now()),
		(SELECT count(*) FROM outbox WHERE published_at IS NULL)`).Scan(&orders, &journal, &overdue, &outbox)
	return
}

// settle waits until nothing is in flight, or until by.
func (e *env) settle(ctx context.Context, by time.Time) bool {
	for {
		o, j, x, b, err := e.inFlight(ctx)
		if err == nil && o == 0 && j == 0 && x == 0 && b == 0 {
			return true
		}
		if time.Now().After(by) || ctx.Err() != nil {
			return false
		}
		sleep(ctx, time.Second)
	}
}

// checkOutside reads every account's orders and balance through the API, as the client.
func (e *env) checkOutside(ctx context.Context, f *findings, l *load, all []*order) error {
	byAcct := make([][]*order, len(l.accts))
	for _, o := range all {
		byAcct[o.acct] = append(byAcct[o.acct], o)
		if o.outcome == "" {
			f.add("S", "client_order_id %s: the client never learnt the outcome (%d CreateOrder calls)", o.coid, o.calls)
		}
	}
	for i, a := range l.accts {
		listed := map[string][]orders.Record{}
		var net, reserved int64
		for r, err := range a.cl.Orders(ctx, url.Values{"limit": {"100"}}) {
			if err != nil {
				return err
			}
			listed[r.ClientOrderID] = append(listed[r.ClientOrderID], r)
			net += r.ChargedAmountSun - r.RefundedAmountSun
			switch r.Status {
			case orders.Created, orders.Paid, orders.Allocating, orders.Delegated:
				reserved += r.ChargedAmountSun
			case orders.Failed, orders.Refunded:
				if r.RefundedAmountSun != r.ChargedAmountSun {
					f.add("L", "order %s is %s but refunded %d of %d SUN (API)", r.ID, r.Status, r.RefundedAmountSun, r.ChargedAmountSun)
				}
			}
		}
		for coid, rs := range listed {
			if len(rs) > 1 {
				f.add("D", "client_order_id %s has %d orders (API)", coid, len(rs))
			}
		}
		for _, o := range byAcct[i] {
			rs := listed[o.coid]
			switch {
			case o.outcome == "created" && len(rs) == 0:
				f.add("L", "order %s (client_order_id %s) answered %d but is not listed (API)", o.id, o.coid, o.status)
			case o.outcome == "created" && rs[0].ID != o.id:
				f.add("D", "client_order_id %s: the client was given order %s, the list has %s (API)", o.coid, o.id, rs[0].ID)
			case o.outcome == "refused" && len(rs) > 0:
				f.add("D", "client_order_id %s was refused (%d %d) yet order %s exists (API)", o.coid, o.status, o.code, rs[0].ID)
			}
		}
		b, err := a.cl.Balance(ctx)
		if err != nil {
			return err
		}
		if b.BalanceSun != fundSun-net {
			f.add("C", "account %s: GET /v1/balance balance_sun %d, funding less its orders' net charges %d (API)", a.id, b.BalanceSun, fundSun-net)
		}
		if b.ReservedSun != reserved {
			f.add("C", "account %s: GET /v1/balance reserved_sun %d, charges of its orders in flight %d (API)", a.id, b.ReservedSun, reserved)
		}
	}
	return nil
}

// checkDB checks the orders, the journal and the ledger in the database.
func (e *env) checkDB(ctx context.Context, f *findings, all []*order) error {
	type q struct {
		col, sql, what string
	}
	for _, c := range []q{
		{"D", `SELECT account_id || ' ' || client_order_id || ': ' || count(*) FROM orders GROUP BY account_id, client_order_id HAVING count(*) > 1`,
			"client_order_id with more than one order"},
		{"C", `SELECT o.id || ': ' || count(p.id) || ' captures of ' || coalesce(sum(p.amount_sun), 0) || ' SUN, charged ' || o.charged_amount_sun
			FROM orders o LEFT JOIN ledger_postings p ON p.reference_id = o.id AND p.kind = 'capture'
			WHERE o.status NOT IN ('created', 'paid', 'allocating', 'delegated')
			GROUP BY o.id HAVING count(p.id) <> 1`,
			"order not captured exactly once"},
		{"C", `SELECT o.id || ': refunds ' || coalesce(sum(p.amount_sun), 0) || ' SUN in ' || count(p.id) || ' postings, refunded_amount_sun ' || o.refunded_amount_sun
			FROM orders o LEFT JOIN ledger_postings p ON p.reference_id = o.id AND p.kind = 'refund'
			GROUP BY o.id HAVING coalesce(sum(p.amount_sun), 0) <> o.refunded_amount_sun OR coalesce(sum(p.amount_sun), 0) > o.charged_amount_sun`,
			"order refunded other than its record says"},
		{"W", `SELECT o.id || ': charged ' || o.charged_amount_sun || ' SUN for ' || o.amount || ' at ' || o.unit_price_centi ||
				' centisun (resource ' || o.energy_amount_sun || ', activation ' || o.activation_amount_sun || ')'
			FROM orders o WHERE o.charged_amount_sun <> o.energy_amount_sun + o.activation_amount_sun
				OR (o.resource <> 'activation' AND abs(o.energy_amount_sun - ceil(o.amount::numeric * o.unit_price_centi / 100)) > o.amount / 200 + 1)`,
			"order charged other than its amount times the price it was accepted at"},
		{"W", `SELECT o.id || ': captured ' || sum(p.amount_sun) || ' SUN, charged ' || o.charged_amount_sun
			FROM orders o JOIN ledger_postings p ON p.reference_id = o.id AND p.kind = 'capture'
			GROUP BY o.id HAVING count(p.id) = 1 AND sum(p.amount_sun) <> o.charged_amount_sun`,
			"capture other than the order's charge"},
		{"G", `SELECT o.id || ': fills delivered ' || sum(f.amount) || ' of ' || o.amount FROM orders o JOIN order_fills f ON f.order_id = o.id
			WHERE f.state IN ('landed', 'returned') GROUP BY o.id HAVING sum(f.amount) > o.amount`,
			"order delivered more than its amount"},
		{"L", `SELECT o.id || ' (' || o.status || '): refunded ' || o.refunded_amount_sun || ' of ' || o.charged_amount_sun
			FROM orders o WHERE o.status IN ('failed', 'refunded') AND (o.refunded_amount_sun <> o.charged_amount_sun OR
			(o.charged_amount_sun > 0 AND NOT EXISTS (SELECT 1 FROM ledger_postings p WHERE p.reference_id = o.id AND p.kind = 'refund')))`,
			"failed order not refunded"},
		{"G", `SELECT order_id || ' fill ' || fill_seq || ': ' || count(*) || ' landed delegations' FROM signed_txs
			WHERE purpose = 'delegate' AND state = 'landed' GROUP BY order_id, fill_seq HAVING count(*) > 1`,
			"fill delegated more than once"},
		{"S", `SELECT id || ' ' || status FROM orders WHERE status IN ('created', 'paid', 'allocating', 'delegated')`,
			"order still in flight"},
		{"S", `SELECT txid || ' ' || purpose || ' ' || state || ' of ' || order_id FROM signed_txs WHERE state IN ('signed', 'broadcast')`,
			"journal transaction not settled"},
		{"S", `SELECT id || ' ' || status || ' expired at ' || expires_at FROM orders
			WHERE status IN ('confirmed', 'active') AND expires_at < now() - interval '60 seconds'`,
			"order past its expiry not ended"},
		{"S", `SELECT 'outbox ' || id || ' ' || topic FROM outbox WHERE published_at IS NULL`, "event not published"},
	} {
		rows, err := e.db.Query(ctx, c.sql)
		if err != nil {
			return fmt.Errorf("%s: %w", c.what, err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return err
			}
			f.add(c.col, "%s: %s (database)", c.what, s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	// Every order the client was told exists is in the database under that id.
	ids := map[string]bool{}
	rows, err := e.db.Query(ctx, `SELECT id FROM orders`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids[id] = true
	}
	rows.Close()
	for _, o := range all {
		if o.outcome == "created" && !ids[o.id] {
			f.add("L", "order %s (client_order_id %s) is not in the database", o.id, o.coid)
		}
	}
	vs, err := ledgerstore.CheckPool(ctx, e.db, ledgerstage.InvariantChecks())
	if err != nil {
		return err
	}
	for _, v := range vs {
		f.add("C", "ledger invariant %s (database)", v)
	}
	return nil
}

// checkChain compares, per (pool, receiver), the energy stake delegated on chain with the
// landed fills of that pool to that receiver: one extra delegation from one pool and one
// missing from another cannot cancel out. A difference is looked at again a few times (an
// undelegation may be between the chain and the database for a few blocks) before it
// counts.
func (e *env) checkChain(ctx context.Context, f *findings, receivers []string) error {
	pending := receivers
	type pair struct{ pool, receiver string }
	var lastDiff map[pair][2]int64
	for round := 0; round < 4 && len(pending) > 0; round++ {
		if round > 0 {
			sleep(ctx, time.Duration(e.st.confirmations+2)*e.st.blockInterval)
		}
		fills := map[pair]int64{}
		rows, err := e.db.Query(ctx, `SELECT f.pool_address, o.receiver, sum(f.balance_sun)::bigint FROM order_fills f JOIN orders o ON o.id = f.order_id
			WHERE f.state = 'landed' AND o.resource = 'energy' AND f.pool_address IS NOT NULL GROUP BY 1, 2`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var p pair
			var s int64
			if err := rows.Scan(&p.pool, &p.receiver, &s); err != nil {
				rows.Close()
				return err
			}
			fills[p] = s
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		lastDiff = map[pair][2]int64{}
		var next []string
		for _, r := range pending {
			var v tronsim.AccountView
			if err := e.simCallRetry(ctx, 30*time.Second, "/sim/accounts/"+r, nil, &v); err != nil {
				return err
			}
			onChain := map[pair]int64{}
			for _, d := range v.DelegationsIn {
				if d.EnergySun > 0 {
					onChain[pair{d.From, r}] += d.EnergySun
				}
			}
			for p := range fills {
				if _, ok := onChain[p]; !ok && p.receiver == r {
					onChain[p] = 0 // landed fills with nothing on chain
				}
			}
			differs := false
			for p, c := range onChain {
				if c != fills[p] {
					differs = true
					lastDiff[p] = [2]int64{c, fills[p]}
				}
			}
			if differs {
				next = append(next, r)
			}
		}
		pending = next
	}
	keys := make([]pair, 0, len(lastDiff))
	for p := range lastDiff {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].receiver+keys[i].pool < keys[j].receiver+keys[j].pool
	})
	stillPending := map[string]bool{}
	for _, r := range pending {
		stillPending[r] = true
	}
	for _, p := range keys {
		if !stillPending[p.receiver] {
			continue
		}
		d := lastDiff[p]
		if d[0] > d[1] {
			f.add("G", "receiver %s: %d SUN of energy stake delegated on chain from %s, landed fills %d (chain)", p.receiver, d[0], p.pool, d[1])
		} else {
			f.add("L", "receiver %s: %d SUN of energy stake delegated on chain from %s, landed fills %d (chain)", p.receiver, d[0], p.pool, d[1])
		}
	}
	return nil
}

// summarise logs the orders' end states and one line per fault kind.
func (e *env) summarise(ctx context.Context, all []*order, faults []fault, atts []attempt, loadEnd, began time.Time) {
	out := map[string]int{}
	for _, o := range all {
		k := o.outcome
		if k == "refused" {
			k = fmt.Sprintf("refused %d %d", o.status, o.code)
		}
		if k == "" {
			k = "unknown"
		}
		out[k]++
	}
	e.log.Info("client outcomes", "by", fmt.Sprint(out))
	states := map[string]int{}
	rows, err := e.db.Query(ctx, `SELECT status || coalesce(' ' || (failure->>'code'), ''), count(*) FROM orders GROUP BY 1 ORDER BY 1`)
	if err == nil {
		for rows.Next() {
			var s string
			var n int
			if rows.Scan(&s, &n) == nil {
				states[s] = n
			}
		}
		rows.Close()
	}
	e.log.Info("orders by state (failure code)", "by", fmt.Sprint(states))
	delivered := func(from, to time.Time) time.Duration {
		var secs *float64
		_ = e.db.QueryRow(ctx, `SELECT max(extract(epoch FROM delegated_at - created_at))::float8 FROM orders
			WHERE created_at >= $1 AND created_at < $2 AND delegated_at IS NOT NULL`, from, to).Scan(&secs)
		if secs == nil {
			return 0
		}
		return time.Duration(*secs * float64(time.Second))
	}
	var p50, p99 *float64
	_ = e.db.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM delegated_at - created_at))::float8,
		percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM delegated_at - created_at))::float8
		FROM orders WHERE delegated_at IS NOT NULL`).Scan(&p50, &p99)
	if p50 != nil && p99 != nil {
		e.log.Info("creation to delegation, all orders", "p50", fmt.Sprintf("%.1fs", *p50), "p99", fmt.Sprintf("%.1fs", *p99))
	}
	var lines []string
	for _, r := range report(faults, atts, delivered, loadEnd) {
		lines = append(lines, r.String())
	}
	ok, failed := 0, 0
	for _, a := range atts {
		if a.status >= 200 && a.status < 300 {
			ok++
		} else {
			failed++
		}
	}
	fmt.Fprintf(os.Stderr, "load: %s at %.0f orders/s, %d order attempts answered 2xx, %d did not\n", loadEnd.Sub(began).Round(time.Second), e.st.rate, ok, failed)
	fmt.Fprintln(os.Stderr, strings.Join(lines, "\n"))
	fmt.Fprintf(os.Stderr, "dev stack exits not caused by the soak: %d\n", max(0, e.exits.Load()-e.killsSent.Load()))
}
