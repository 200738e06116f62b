package acceptance

// Group commit of order acceptance (docs/orders.md "Group commit").
//
// Accept (POST /v1/orders) prices its order without the database, then hands it to a committer.
// A committer takes every creation waiting (up to GroupMax) and stores them in ONE
// transaction of two round trips, however many there are:
//
//  1. BEGIN, the receivers' own-address check, the energy receivers' ceiling locks with
//     their live energy (under RECEIVER_MAX_ENERGY), the accounts' ledger rows locked (FOR
//     UPDATE, in account order) with their funds, which client_order_ids have a record,
//     and the accounts' in-flight counts;
//     and which of the orders' request signatures are recorded (used_signatures);
//     and, with CommitSupply, the committed supply's rows of the group's resources (read
//     without a lock, written last in step 2, see run);
//  2. for the orders it admits: the holds (one UPDATE of the accounts, one INSERT of the
//     holds), the orders and their intents, the idempotency records with the 201 bodies,
//     the signatures' records, and COMMIT.
//
// Each order keeps the guarantee of the one-by-one path: its record, hold, row and intent
// commit together or not at all. The committer admits only the plain case: a fresh
// client_order_id, a receiver that is not ours, funds that cover the total (after the
// group's earlier orders of the account), room under the in-flight limit and under the
// receiver's energy ceiling (after the group's earlier orders to it), and supply committed
// to it (CommitSupply: the committed supply's rows, written last). Everything else is
// declined and goes through the one-by-one transaction (Accept), which gives the replay,
// 3010, 3015, 3003, 4001/4002, 1101, 5005 or 5001 answer with its details exactly as
// before; so does every member of a group whose transaction failed (a group that raced
// another for the last committed units among them). A declined order was
// never written: the group decided before writing, or rolled back.
//
// Per order this is a fraction of the one-by-one path's Postgres work (statements and
// commits are shared), which is what the orders_create bench measures.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/metrics"
	"rental/infra/orderstore"
	"rental/infra/pg"
	"rental/infra/sigstore"
	"rental/infra/supplystore"
	"rental/schemas/orders"
)

// Defaults of the group commit (Options).
const (
	DefaultGroupCommitters = 2
	DefaultGroupMax        = 64
	// groupLockWait bounds the group's lock waits (accounts' rows, a key being recorded by
	// a concurrent duplicate). A group that waits longer fails and its orders go one by
	// one, where each waits up to LockWait alone instead of holding up a whole group.
	groupLockWait = 500 * time.Millisecond
	// groupIdle is how long a committer waits for work before it ends (one starts again
	// with the next creation).
	groupIdle = 2 * time.Second
)

// errDeclined is a creation the group did not store: run it one by one.
var errDeclined = errors.New("acceptance: declined by the group")

// groupEntry is one creation handed to a committer.
type groupEntry struct {
	n    orderstore.NewOrder
	key  idempotency.Key
	hash []byte
	sig  sigstore.Sig // recorded with the order (zero: unsigned)
	body []byte       // the stored 201 body once done is nil
	done chan error   // nil: created; errDeclined: the caller runs the one-by-one path
}

// groupCommitter batches creations; committers are goroutines started on demand.
type groupCommitter struct {
	m       *Orders
	queue   chan *groupEntry
	max     int
	workers int
	active  atomic.Int32

	size     prometheus.Histogram
	wait     prometheus.Histogram
	declined *prometheus.CounterVec
}

func newGroupCommitter(m *Orders, reg prometheus.Registerer) *groupCommitter {
	g := &groupCommitter{m: m, max: m.o.GroupMax, workers: m.o.GroupCommitters,
		queue: make(chan *groupEntry, 16*m.o.GroupMax)}
	g.size = metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rental_order_group_size",
		Help:    "Orders stored per group-commit transaction of POST /v1/orders.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128},
	}))
	g.wait = metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rental_order_group_wait_seconds",
		Help:    "Time a creation spent with the group commit: waiting for a committer and its group's transaction.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}))
	g.declined = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rental_order_group_declined_total",
		Help: "Creations the group commit left to the one-by-one transaction, by reason.",
	}, []string{"reason"}))
	return g
}

// submit hands e to a committer and waits for its outcome (nil or errDeclined).
func (g *groupCommitter) submit(ctx context.Context, e *groupEntry) error {
	e.done = make(chan error, 1)
	select {
	case g.queue <- e:
	default:
		g.declined.WithLabelValues("queue_full").Inc()
		return errDeclined
	}
	g.wake()
	start := time.Now()
	select {
	case err := <-e.done:
		g.wait.Observe(time.Since(start).Seconds())
		return err
	case <-ctx.Done():
		// The committer still finishes e; its outcome is not waited for. A client retry
		// with the same client_order_id replays it if it was stored.
		return ctx.Err()
	}
}

// wake starts a committer when fewer than workers run.
func (g *groupCommitter) wake() {
	for {
		n := g.active.Load()
		if int(n) >= g.workers {
			return
		}
		if g.active.CompareAndSwap(n, n+1) {
			go g.work()
			return
		}
	}
}

func (g *groupCommitter) work() {
	idle := time.NewTimer(groupIdle)
	defer idle.Stop()
	for {
		select {
		case e := <-g.queue:
			group := []*groupEntry{e}
		collect:
			for len(group) < g.max {
				select {
				case e := <-g.queue:
					group = append(group, e)
				default:
					break collect
				}
			}
			g.commit(group)
			idle.Reset(groupIdle)
		case <-idle.C:
			g.active.Add(-1)
			// A creation queued after the last receive and before the decrement saw all
			// committers busy: start one for it.
			if len(g.queue) > 0 {
				g.wake()
			}
			return
		}
	}
}

// commit stores what it can of group in one transaction and answers every entry.
func (g *groupCommitter) commit(group []*groupEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admitted, err := g.store(ctx, group)
	if supplystore.Raced(err) {
		// Another transaction took the last units meanwhile: one by one, each order is
		// committed against the locked rows (or refused with 5001).
		g.declined.WithLabelValues("supply_raced").Add(float64(len(group)))
		admitted, err = nil, nil
	}
	if err != nil {
		g.m.log.Warn("order group commit failed; its orders go one by one", "orders", len(group), "err", err)
		g.declined.WithLabelValues("group_failed").Add(float64(len(group)))
		admitted = nil
	}
	g.size.Observe(float64(len(admitted)))
	stored := make(map[*groupEntry]bool, len(admitted))
	for _, e := range admitted {
		stored[e] = true
	}
	for _, e := range group {
		if stored[e] {
			e.done <- nil
		} else {
			e.done <- errDeclined
		}
	}
}

// store runs the group's transaction and returns the entries it stored.
func (g *groupCommitter) store(ctx context.Context, group []*groupEntry) ([]*groupEntry, error) {
	conn, err := g.m.o.Ledger.Pool().Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	return g.run(ctx, conn.Conn(), group)
}

func (g *groupCommitter) run(ctx context.Context, conn *pgx.Conn, group []*groupEntry) ([]*groupEntry, error) {
	m := g.m
	// A client_order_id twice in the group: the later ones wait for the group and then
	// replay (or 3010) one by one.
	seen := map[idempotency.Key]bool{}
	var cands []*groupEntry
	for _, e := range group {
		if seen[e.key] {
			g.declined.WithLabelValues("duplicate").Inc()
			continue
		}
		seen[e.key] = true
		cands = append(cands, e)
	}
	accounts, keys, receivers := make([]string, len(cands)), make([]idempotency.Key, len(cands)), make([]string, len(cands))
	for i, e := range cands {
		accounts[i], keys[i], receivers[i] = e.n.AccountID, e.key, e.n.Receiver
	}
	b := &pgx.Batch{}
	// The statements after this one take arrays of the group's keys; they are planned by
	// their indexes, once per connection (pg.IndexPlans).
	b.Queue(pg.IndexPlans)
	wait := min(groupLockWait, m.o.LockWait)
	ours := m.queueOurs(b, receivers, &wait) // before the locks: it sets the lock wait
	// The receivers' ceiling locks come before the accounts' rows, as in the one-by-one
	// transaction (which takes the receiver's lock, then the account's row with its hold),
	// and in receiver order, so that groups queue behind each other instead of deadlocking.
	var ceiling []string
	if m.o.ReceiverMaxEnergy > 0 {
		for _, e := range cands {
			if e.n.Resource == orders.Energy {
				ceiling = append(ceiling, e.n.Receiver)
			}
		}
		slices.Sort(ceiling)
		ceiling = slices.Compact(ceiling)
	}
	var live *orderstore.LiveEnergy
	if len(ceiling) > 0 {
		orderstore.QueueLockReceivers(b, ceiling)
		live = orderstore.QueueReceiversLiveEnergy(b, ceiling, m.o.Now())
	}
	locked := m.o.Ledger.QueueLockAccounts(b, accounts)
	existing := m.o.Idempotency.QueueExisting(b, keys)
	inFlight := orderstore.QueueInFlight(b, accounts, m.o.MaxInFlight)
	// Signatures recorded before: those orders go one by one, which answers 1009.
	var sigs []sigstore.Sig
	if m.o.Signatures != nil {
		for _, e := range cands {
			if !e.sig.IsZero() {
				sigs = append(sigs, e.sig)
			}
		}
	}
	var usedSigs *sigstore.QueuedExisting
	if len(sigs) > 0 {
		usedSigs = m.o.Signatures.QueueExisting(b, sigs)
	}
	// The committed supply's rows are read here without a lock and written last, just
	// before COMMIT (they are locked from there to the commit only, not across a round
	// trip); a group that raced another for the last units fails on the rows' check and
	// its orders go one by one, where each locks the rows.
	var sup *supplystore.Locked
	var supRes []string
	for _, e := range cands {
		if m.commits(e.n.Resource) {
			supRes = append(supRes, string(e.n.Resource))
		}
	}
	if len(supRes) > 0 {
		sup = supplystore.QueueRead(b, m.o.Network, supRes)
	}
	// The transaction is begun in this batch and committed in the write batch (BEGIN and
	// COMMIT ride along), so it costs two round trips; on any error it is rolled back, and
	// a connection that cannot be is dropped by the pool.
	tx, err := pg.BeginWith(ctx, conn, b)
	if err != nil {
		return nil, err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx) // no-op once committed
	}()
	var admitted []*groupEntry
	taken, added, energy := map[string]int64{}, map[string]int{}, map[string]int64{}
	for _, e := range cands {
		acc, total := e.n.AccountID, e.n.Total()
		f, ok := locked.Funds(acc)
		var reason string
		switch {
		case existing.Has(e.key):
			reason = "key_recorded"
		case usedSigs != nil && !e.sig.IsZero() && usedSigs.Has(e.sig):
			reason = "signature_used"
		case ours(e.n.Receiver):
			reason = "receiver_ours"
		case !ok || total > f.Available()-taken[acc]:
			reason = "funds"
		case m.o.MaxInFlight > 0 && inFlight.Of(acc)+added[acc] >= m.o.MaxInFlight:
			reason = "in_flight"
		case live != nil && e.n.Resource == orders.Energy && live.Of(e.n.Receiver)+energy[e.n.Receiver]+e.n.Amount > m.o.ReceiverMaxEnergy:
			reason = "receiver_ceiling"
		// Last: Take commits the units when the order fits.
		case sup != nil && m.commits(e.n.Resource) && !sup.Take(string(e.n.Resource), *e.n.Tier, e.n.Amount, !m.o.ForbidProviderSpill):
			reason = "supply"
		}
		if reason != "" {
			g.declined.WithLabelValues(reason).Inc()
			continue
		}
		taken[acc] += total
		added[acc]++
		if e.n.Resource == orders.Energy {
			energy[e.n.Receiver] += e.n.Amount
		}
		admitted = append(admitted, e)
	}
	if len(admitted) == 0 {
		return nil, tx.Commit(ctx) // nothing written: ends the transaction
	}
	holds, ns := make([]ledgerstore.Hold, len(admitted)), make([]orderstore.NewOrder, len(admitted))
	for i, e := range admitted {
		holds[i], ns[i] = ledgerstore.Hold{AccountID: e.n.AccountID, OrderID: e.n.ID, AmountSun: e.n.Total()}, e.n
	}
	b = &pgx.Batch{}
	if err := m.o.Ledger.QueueOrderHolds(b, holds); err != nil {
		return nil, err
	}
	rows, err := orderstore.QueueInsertMany(b, ns)
	if err != nil {
		return nil, err
	}
	done := make([]idempotency.Done, len(admitted))
	for i, e := range admitted {
		if e.body, err = json.Marshal(rows[i].Record); err != nil {
			return nil, err
		}
		done[i] = idempotency.Done{Key: e.key, Hash: e.hash,
			Response: idempotency.Response{Status: http.StatusCreated, Body: e.body, ObjectID: e.n.ID}}
	}
	m.o.Idempotency.QueueInsertDone(b, done)
	if usedSigs != nil {
		var rec []sigstore.Sig
		for _, e := range admitted {
			if !e.sig.IsZero() {
				rec = append(rec, e.sig)
			}
		}
		if len(rec) > 0 {
			m.o.Signatures.QueueInsertMany(b, rec)
		}
	}
	if sup != nil {
		sup.QueueTaken(b) // last: the rows' locks are held until the commit
	}
	// A balance crossing its low threshold has writes of its own (and balance.low) after
	// the holds: then COMMIT is a round trip of its own.
	low := m.o.Ledger.LowBalanceChanges(locked, holds)
	committed := func() error { return nil }
	if !low {
		committed = pg.QueueCommit(b, tx)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if low {
		if err := m.o.Ledger.AfterOrderHolds(ctx, tx, locked, holds); err != nil {
			return nil, err
		}
		committed = func() error { return tx.Commit(ctx) }
	}
	if err := committed(); err != nil {
		return nil, err
	}
	return admitted, nil
}
