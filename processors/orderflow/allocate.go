package orderflow

import (
	"context"
	"fmt"
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
	if o.Network.SellsOwnStake() && len(f.o.Pools) > 0 {
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
	if f.o.Deep == nil || o.Resource != orders.Energy || !o.Network.SellsOwnStake() || len(f.o.Pools) == 0 || o.DurationSeconds == nil {
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
	res, err := f.chain.weights(ctx, f.o.Node, f.o.Pools[0].Address(), f.o.Now())
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

// allocatePools reserves stake from the own pools; it queues the fills in w and returns the
// next fill sequence number and what is left to allocate. It locks every pool row of the
// network (in address order, so replicas never deadlock) until the transaction ends.
func (f *Flow) allocatePools(ctx context.Context, tx pgx.Tx, o orderstore.Row, w *orderstore.Writes) (int, int64, error) {
	// The chain's figures are read before the lock (they are cached, and a node call
	// under the lock would stall every allocation): a figure read earlier is still safe,
	// because every fill that landed after it was read counts as in flight below.
	type poolFigure struct {
		pool   tron.Address
		can    int64
		readAt time.Time
	}
	figures := map[string]poolFigure{}
	var addrs []string
	var read []orderstore.PoolFigure
	for p := range f.byAddr {
		can, readAt, err := f.chain.delegatable(ctx, f.o.Node, p, resourceCode(o.Resource), f.o.Now())
		if err != nil {
			return 0, 0, fmt.Errorf("read pool %s: %w", p, err)
		}
		figures[p.String()] = poolFigure{p, can, readAt}
		addrs = append(addrs, p.String())
		read = append(read, orderstore.PoolFigure{Address: p.String(), ReadAfter: readAt.Add(-clockMargin)})
	}
	if len(figures) == 0 {
		return 0, o.Amount, nil
	}
	res, err := f.chain.weights(ctx, f.o.Node, figures[addrs[0]].pool, f.o.Now())
	if err != nil {
		return 0, 0, fmt.Errorf("read network weights: %w", err)
	}
	limit, weight := perUnit(res, o.Resource)
	// In flight: fills not yet visible in the chain's figure. That is every fill reserved
	// or broadcast, and every fill that landed after the figure was read, with a margin
	// for the clocks of this process and the database. The sum is read with the lock, in
	// the same round trip, once the lock is held.
	locked, err := orderstore.LockPools(ctx, tx, o.Network, read)
	if err != nil {
		return 0, 0, err
	}
	inflight := locked.InFlight
	order := locked.Order // the network's pools in the database's address order: the draw order
	remaining := o.Amount
	seq := 0
	for _, a := range order {
		fg, ours := figures[a]
		if !ours {
			continue
		}
		avail := (fg.can - inflight[fg.pool.String()]) / tron.SunPerTRX * tron.SunPerTRX // delegations move whole TRX
		if avail < tron.SunPerTRX {
			continue
		}
		need, err := f.balanceFor(remaining, limit, weight)
		if err != nil {
			return 0, 0, err
		}
		take, amount := need, remaining
		if need > avail {
			take = avail
			got, err := tron.EnergyForBalance(take, limit, weight)
			if err != nil {
				return 0, 0, err
			}
			amount = min(remaining, got*10_000/(10_000+f.o.MarginBps))
			if amount <= 0 {
				continue
			}
		}
		w.ReserveFill(o.ID, orderstore.NewFill{Seq: seq, Source: orderstore.SourcePool, Pool: fg.pool.String(), Amount: amount, BalanceSun: take})
		seq++
		remaining -= amount
		if remaining <= 0 {
			break
		}
	}
	return seq, remaining, nil
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
