package orderflow

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/orderstore"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/orders"
)

func resourceCode(r orders.Resource) tron.ResourceCode {
	if r == orders.Bandwidth {
		return tron.Bandwidth
	}
	return tron.Energy
}

// perUnit returns the network's conversion for the resource: units = balanceSun × limit /
// (weight × 1 TRX).
func perUnit(res *tron.AccountResource, r orders.Resource) (limit, weight int64) {
	if r == orders.Bandwidth {
		return res.TotalNetLimit, res.TotalNetWeight
	}
	return res.TotalEnergyLimit, res.TotalEnergyWeight
}

// allocate reserves stake for the order from the own pools, cheapest source first, under
// the pool rows' locks: what a pool can delegate is the chain's figure minus the fills
// reserved or broadcast but not yet seen landed, so two replicas never sell the same stake.
// A shortfall is delivered partially (partial flag and pro-rata refund at confirmation);
// no stock at all fails the order with 5001, charge reversed.
func (f *Flow) allocate(ctx context.Context, tx pgx.Tx, o orderstore.Row) (bool, action, error) {
	now := f.o.Now()
	if o.Resource == orders.Activation {
		return true, nil, f.setStatus(ctx, tx, o, orders.Allocating, now.Add(30*time.Second))
	}
	// Everything written here goes in one round trip once the amounts are known: the pools'
	// row locks (taken in allocatePools) are held from then to commit, and every round trip
	// under them is time no other order of any replica can be allocated.
	var w orderstore.Writes
	remaining := o.Amount
	seq := 0
	if o.Network.SellsOwnStake() && len(f.pools()) > 0 {
		var err error
		if seq, remaining, err = f.allocatePools(ctx, tx, o, &w); err != nil {
			return false, nil, err
		}
	}
	if remaining > 0 && len(f.o.Providers) > 0 {
		// The rest is bought from the first provider when the order is delivered; the
		// fill row is written now, so the purchase has a stable reference (order and fill)
		// that a crash or a retry can never change.
		w.ReserveFill(o.ID, orderstore.NewFill{Seq: seq, Source: f.o.Providers[0].Slug(), Amount: remaining})
		seq++
	}
	filledBy := orders.FilledByPool
	if remaining > 0 && len(f.o.Providers) == 0 {
		// Without providers the deep reserve is next (with providers, it takes what the
		// last of them cannot deliver: buyFromProvider).
		queued, err := f.queueDeepFill(ctx, tx, &w, o, seq, remaining)
		if err != nil {
			return false, nil, err
		}
		if queued {
			seq++
			filledBy = orders.FilledByDeep
		}
	}
	if seq == 0 {
		return true, nil, f.fail(ctx, tx, o, apierr.InsufficientSupply, "neither the stake pools nor the providers could fill the order when it was allocated")
	}
	w.Allocated(o.ID, filledBy, now.Add(30*time.Second))
	if err := w.Send(ctx, tx); err != nil {
		return false, nil, err
	}
	f.transitions.WithLabelValues(string(orders.Allocating)).Inc()
	return true, nil, nil
}

// queueDeepFill queues a fill of up to amount energy from the deep reserve as fill seq,
// and reports whether it did: only for energy, on a network selling own stake, with the
// contract configured and energy left in it beyond the deep fills still in flight. A
// contract that cannot be read is treated as empty (the part goes undelivered and is
// refunded), not as an error that would hold the order up. Two processors renting the
// last energy at once are possible (fills are not locked against each other outside the
// allocation); the rent that loses reverts, and its fill fails like any refused delegation.
func (f *Flow) queueDeepFill(ctx context.Context, q pgx.Tx, w *orderstore.Writes, o orderstore.Row, seq int, amount int64) (bool, error) {
	if f.o.Deep == nil || o.Resource != orders.Energy || !o.Network.SellsOwnStake() || len(f.pools()) == 0 || o.DurationSeconds == nil {
		return false, nil
	}
	avail, err := f.o.Deep.Available(ctx)
	if err != nil {
		f.log.Warn("deep reserve unreadable; the order's rest is not delivered", "order", o.ID, "err", err)
		return false, nil
	}
	inflight, err := orderstore.SourceInFlight(ctx, q, orderstore.SourceDeep)
	if err != nil {
		return false, err
	}
	take := min(amount, avail-inflight)
	if take <= 0 {
		return false, nil
	}
	res, err := f.chain.weights(ctx, f.o.Node, f.pools()[0], f.o.Now())
	if err != nil {
		return false, fmt.Errorf("read network weights: %w", err)
	}
	limit, weight := perUnit(res, o.Resource)
	balance, err := tron.BalanceForEnergy(take, limit, weight)
	if err != nil {
		return false, err
	}
	// What the contract is expected to delegate (it rounds up to whole TRX at its block's
	// weights; verification allows the drift margin).
	balance = (balance + tron.SunPerTRX - 1) / tron.SunPerTRX * tron.SunPerTRX
	w.ReserveFill(o.ID, orderstore.NewFill{Seq: seq, Source: orderstore.SourceDeep, Pool: f.o.Deep.Contract().String(), Amount: take,
		BalanceSun: balance})
	return true, nil
}

// poolFigure is a pool's delegatable balance of one resource as the chain reported it.
type poolFigure struct {
	pool   tron.Address
	can    int64
	readAt time.Time
}

// poolFigures reads every own pool's delegatable balance of the resource, and the
// network's conversion, before any lock is taken: they are cached, and a node call under
// the lock would stall every allocation. A figure read earlier is still safe, because every
// fill that landed after it was read counts as in flight (orderstore.LockPools).
func (f *Flow) poolFigures(ctx context.Context, r orders.Resource) (figures map[string]poolFigure, read []orderstore.PoolFigure,
	limit, weight int64, err error) {
	figures = map[string]poolFigure{}
	var any tron.Address
	for _, p := range f.o.Signers.Usable() { // a pool without a usable signer is not drawn from
		can, readAt, err := f.chain.delegatable(ctx, f.o.Node, p, resourceCode(r), f.o.Now())
		if err != nil {
			return nil, nil, 0, 0, fmt.Errorf("read pool %s: %w", p, err)
		}
		figures[p.String()] = poolFigure{p, can, readAt}
		read = append(read, orderstore.PoolFigure{Address: p.String(), ReadAfter: readAt.Add(-clockMargin)})
		any = p
	}
	if len(figures) == 0 {
		return figures, nil, 0, 0, nil
	}
	res, err := f.chain.weights(ctx, f.o.Node, any, f.o.Now())
	if err != nil {
		return nil, nil, 0, 0, fmt.Errorf("read network weights: %w", err)
	}
	limit, weight = perUnit(res, r)
	return figures, read, limit, weight, nil
}

// allocatePools reserves stake from the own pools; it queues the fills in w and returns the
// next fill sequence number and what is left to allocate. It locks every pool row of the
// network (in address order, so replicas never deadlock) until the transaction ends.
func (f *Flow) allocatePools(ctx context.Context, tx pgx.Tx, o orderstore.Row, w *orderstore.Writes) (int, int64, error) {
	figures, read, limit, weight, err := f.poolFigures(ctx, o.Resource)
	if err != nil {
		return 0, 0, err
	}
	if len(figures) == 0 {
		return 0, o.Amount, nil
	}
	// In flight: fills not yet visible in the chain's figure. That is every fill reserved
	// or broadcast, and every fill that landed after the figure was read, with a margin
	// for the clocks of this process and the database. The sum is read with the lock, in
	// the same round trip, once the lock is held.
	locked, err := orderstore.LockPools(ctx, tx, o.Network, read)
	if err != nil {
		return 0, 0, err
	}
	fills, remaining, err := f.draw(locked.Order, figures, locked.InFlight, o.Amount, limit, weight)
	if err != nil {
		return 0, 0, err
	}
	for _, fl := range fills {
		w.ReserveFill(o.ID, fl)
	}
	return len(fills), remaining, nil
}

// draw takes amount units from the pools in draw order (the database's address order) as
// far as they reach: what a pool can give is its chain figure less inflight, which draw
// raises by what it takes, so several orders drawn against the same reading never take the
// same stake. It returns the fills (sequence from 0) and what is left.
func (f *Flow) draw(order []string, figures map[string]poolFigure, inflight map[string]int64, amount, limit, weight int64) (
	[]orderstore.NewFill, int64, error) {
	var fills []orderstore.NewFill
	remaining := amount
	for _, a := range order {
		fg, ours := figures[a]
		if !ours {
			continue
		}
		avail := (fg.can - inflight[a]) / tron.SunPerTRX * tron.SunPerTRX // delegations move whole TRX
		if avail < tron.SunPerTRX {
			continue
		}
		need, err := f.balanceFor(remaining, limit, weight)
		if err != nil {
			return nil, 0, err
		}
		take, got := need, remaining
		if need > avail {
			take = avail
			units, err := tron.EnergyForBalance(take, limit, weight)
			if err != nil {
				return nil, 0, err
			}
			got = min(remaining, units*10_000/(10_000+f.o.MarginBps))
			if got <= 0 {
				continue
			}
		}
		fills = append(fills, orderstore.NewFill{Seq: len(fills), Source: orderstore.SourcePool, Pool: a, Amount: got, BalanceSun: take})
		inflight[a] += take
		remaining -= got
		if remaining <= 0 {
			break
		}
	}
	return fills, remaining, nil
}

// balanceFor is the staked balance (whole TRX, with the drift margin) that yields units.
func (f *Flow) balanceFor(units, limit, weight int64) (int64, error) {
	b, err := tron.BalanceForEnergy(units, limit, weight)
	if err != nil {
		return 0, err
	}
	b += b * f.o.MarginBps / 10_000
	b = (b + tron.SunPerTRX - 1) / tron.SunPerTRX * tron.SunPerTRX
	return max(b, tron.SunPerTRX), nil
}

// ---- allocation in groups ----
//
// Every allocation takes the network's pool rows' locks, so allocations of every replica
// follow one another. Orders whose intents arrive together (one per intents partition a
// replica consumes) are therefore allocated together: one transaction locks those of them
// still waiting, then the pools, reserves every order's fills against one in-flight
// reading and moves them all to allocating, in two round trips (BEGIN and the locks; the
// writes and COMMIT). The pools' locks are handed over once per group, not once per order.
// An order the group cannot allocate whole from the pools (a shortfall for the providers
// or the deep reserve, bandwidth, an activation, another network) is left as it is, and
// its own step allocates it alone.

// maxAllocGroup bounds the orders of one group transaction.
const maxAllocGroup = 64

// allocGroup is the queue of orders waiting to be allocated in a group; the request at its
// head leads: it runs the next group's transaction.
type allocGroup struct {
	mu      sync.Mutex
	queue   []*allocReq
	running bool
}

type allocReq struct {
	id string
	ch chan bool // one message: false = handled by another's group, true = lead the next group
}

// allocateInGroup allocates the order together with those of concurrent callers when it is
// still waiting for its allocation; it returns once the order's group ran (whatever it did:
// the order's own step handles anything left). Callers then Advance the order as usual.
func (f *Flow) allocateInGroup(ctx context.Context, orderID string) {
	if !f.hasPools() {
		return
	}
	g := &f.alloc
	r := &allocReq{id: orderID, ch: make(chan bool, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, r)
	lead := !g.running // while no group runs the queue is empty: r is its head
	g.running = true
	g.mu.Unlock()
	if !lead && !<-r.ch {
		return
	}
	g.mu.Lock()
	n := min(len(g.queue), maxAllocGroup)
	group := append([]*allocReq(nil), g.queue[:n]...)
	g.queue = g.queue[n:]
	g.mu.Unlock()

	ids := make([]string, len(group))
	for i, q := range group {
		ids[i] = q.id
	}
	if err := f.allocateGroup(ctx, ids); err != nil && ctx.Err() == nil {
		f.log.Warn("group allocation failed; each order allocates itself", "orders", len(ids), "err", err)
	}

	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].ch <- true // the next group's leader
	} else {
		g.running = false
	}
	g.mu.Unlock()
	for _, q := range group {
		if q != r {
			q.ch <- false
		}
	}
}

// allocateGroup allocates, in one transaction, those of ids still waiting for their
// allocation that the pools can fill whole (energy on this network).
func (f *Flow) allocateGroup(ctx context.Context, ids []string) error {
	figures, read, limit, weight, err := f.poolFigures(ctx, orders.Energy)
	if err != nil || len(figures) == 0 {
		return err
	}
	c, err := f.o.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	tx, locked, pools, err := orderstore.BeginAllocation(ctx, c.Conn(), ids, f.o.Network, read)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	now := f.o.Now()
	// Drawn first against the pools' bounds; when an order does not fit whole, against the
	// exact sums (read under the same locks), which leave at least as much.
	type drawn struct {
		id    string
		fills []orderstore.NewFill
	}
	plan := func(inflight map[string]int64) (out []drawn, short bool, err error) {
		for _, o := range locked.Rows {
			if o.Resource != orders.Energy || o.Network != f.o.Network {
				continue
			}
			fills, remaining, err := f.draw(pools.Order, figures, inflight, o.Amount, limit, weight)
			if err != nil {
				return nil, false, err
			}
			if remaining > 0 || len(fills) == 0 {
				for _, fl := range fills { // not whole: its own step allocates it, from every source
					inflight[fl.Pool] -= fl.BalanceSun
				}
				short = true
				continue
			}
			out = append(out, drawn{o.ID, fills})
		}
		return out, short, nil
	}
	planned, short, err := plan(maps.Clone(pools.InFlight))
	if err != nil {
		return err
	}
	if short && !pools.Exact {
		exact, err := orderstore.ExactInFlight(ctx, tx, read)
		if err != nil {
			return err
		}
		f.exactSums.Inc()
		if planned, _, err = plan(exact); err != nil {
			return err
		}
	}
	var w orderstore.Writes
	for _, d := range planned {
		for _, fl := range d.fills {
			w.ReserveFill(d.id, fl)
		}
		w.Allocated(d.id, orders.FilledByPool, now.Add(30*time.Second))
	}
	allocated := len(planned)
	if allocated == 0 {
		return tx.Rollback(ctx)
	}
	if err := w.SendCommit(ctx, tx); err != nil {
		return err
	}
	f.transitions.WithLabelValues(string(orders.Paid)).Add(float64(allocated))
	f.transitions.WithLabelValues(string(orders.Allocating)).Add(float64(allocated))
	f.allocGroupSize.Observe(float64(allocated))
	return nil
}
