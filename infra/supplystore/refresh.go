package supplystore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/pg"
	"rental/infra/supply"
	"rental/infra/tron"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// inFlight is what the orders still hold, read in one snapshot with the rows'
// committed_total: the orders accepted and not yet allocated, and the fills reserved or
// broadcast that the chain's or the provider's figure may not show yet (the notion the
// order processor's allocation uses).
type inFlight struct {
	committed   map[key]int64
	unallocated map[[2]string][2]int64      // (resource, tier) → amount, count
	poolSun     map[string]map[string]int64 // resource → pool address → SUN
	deep        int64                       // energy units
	market      map[[2]string]int64         // (resource, tier) → provider fills not yet bought
}

// readInFlight reads what is in flight; with pools, pool fills that landed after
// landedAfter count as in flight too (a pool figure read before then does not show them).
func readInFlight(ctx context.Context, pool *pgxpool.Pool, n network.Network, pools []string, landedAfter time.Time) (inFlight, error) {
	in := inFlight{committed: map[key]int64{}, unallocated: map[[2]string][2]int64{}, poolSun: map[string]map[string]int64{},
		market: map[[2]string]int64{}}
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		// Every read below reaches its rows through an index on what is in flight
		// (orders_in_flight, order_fills_in_flight, order_fills_landed); planned for the
		// tables as they were, the sums scanned them whole once per cycle as they grew.
		b.Queue(pg.IndexPlans)
		b.Queue(`SELECT resource, source, committed_total FROM supply_commitments WHERE network = $1`, string(n)).
			Query(func(rows pgx.Rows) error {
				defer rows.Close()
				for rows.Next() {
					var k key
					var v int64
					if err := rows.Scan(&k.res, &k.src, &v); err != nil {
						return err
					}
					in.committed[k] = v
				}
				return rows.Err()
			})
		b.Queue(`SELECT resource, coalesce(tier, ''), sum(amount)::bigint, count(*) FROM orders
			WHERE network = $1 AND status IN ('created', 'paid') AND resource IN ('energy', 'bandwidth')
			GROUP BY 1, 2 ORDER BY 1, 2`, string(n)).Query(func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				var res, tier string
				var amount, count int64
				if err := rows.Scan(&res, &tier, &amount, &count); err != nil {
					return err
				}
				in.unallocated[[2]string{res, tier}] = [2]int64{amount, count}
			}
			return rows.Err()
		})
		// The fills carry their order's network, resource and tier (migration 00025): no
		// join to the orders.
		b.Queue(`SELECT f.resource, coalesce(f.tier, ''), f.source, coalesce(f.pool_address, ''), f.state,
				sum(f.amount)::bigint, sum(f.balance_sun)::bigint
			FROM order_fills f
			WHERE f.network = $1 AND f.state IN ('reserved', 'broadcast')
			GROUP BY 1, 2, 3, 4, 5`, string(n)).Query(func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				var res, tier, source, pool, state string
				var amount, sun int64
				if err := rows.Scan(&res, &tier, &source, &pool, &state, &amount, &sun); err != nil {
					return err
				}
				switch source {
				case "pool":
					if in.poolSun[res] == nil {
						in.poolSun[res] = map[string]int64{}
					}
					in.poolSun[res][pool] += sun
				case "deep":
					in.deep += amount
				default: // a provider: once bought (broadcast) its listing shows the sale
					if state == "reserved" {
						in.market[[2]string{res, tier}] += amount
					}
				}
			}
			return rows.Err()
		})
		if len(pools) > 0 {
			b.Queue(`SELECT f.resource, f.pool_address, sum(f.balance_sun)::bigint FROM order_fills f
				WHERE f.pool_address = ANY($2) AND f.state = 'landed' AND f.updated_at > $3 AND f.source = 'pool' AND f.network = $1
				GROUP BY 1, 2`, string(n), pools, landedAfter).Query(func(rows pgx.Rows) error {
				defer rows.Close()
				for rows.Next() {
					var res, addr string
					var sun int64
					if err := rows.Scan(&res, &addr, &sun); err != nil {
						return err
					}
					if in.poolSun[res] == nil {
						in.poolSun[res] = map[string]int64{}
					}
					in.poolSun[res][addr] += sun
				}
				return rows.Err()
			})
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return in, err
}

// capacity is what a cycle read fresh, in units per row, before the orders in flight.
type capacity struct {
	own      map[string]int64 // resource → units
	perOrder map[string]int64 // resource → units an order's rounding may waste
	market   map[[2]string]int64
	deep     int64
}

// tiers are the tiers a market row is kept for: those on sale (not retired).
var tiers = func() []pricing.Tier {
	var out []pricing.Tier
	for _, t := range pricing.Tiers {
		if !pricing.Retired(t) {
			out = append(out, t)
		}
	}
	return out
}()

var resources = []pricing.Resource{pricing.Energy, pricing.Bandwidth}

// rowsFrom computes free per row: capacity less what is in flight. The orders not yet
// allocated are counted as allocation will draw them: own pools first (with per_order
// each), the rest from their tier's providers, what those lack from the deep reserve.
func rowsFrom(c capacity, in inFlight) []Row {
	free := map[key]int64{}
	for _, r := range resources {
		res := string(r)
		free[key{res, SourceOwn}] = c.own[res]
		for _, t := range tiers {
			free[key{res, Market(t)}] = c.market[[2]string{res, string(t)}] - in.market[[2]string{res, string(t)}]
		}
		free[key{res, SourceDeep}] = 0
	}
	free[key{string(pricing.Energy), SourceDeep}] = c.deep - in.deep
	ks := make([][2]string, 0, len(in.unallocated))
	for k := range in.unallocated {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
	for _, k := range ks {
		u := in.unallocated[k]
		own := key{k[0], SourceOwn}
		need := u[0] + u[1]*c.perOrder[k[0]]
		fromOwn := min(need, max(free[own], 0))
		free[own] -= fromOwn
		rest := need - fromOwn
		if rest <= 0 {
			continue
		}
		m := key{k[0], Market(pricing.Tier(k[1]))}
		fromMarket := min(rest, max(free[m], 0))
		free[m] -= fromMarket
		rest -= fromMarket
		free[key{k[0], SourceDeep}] -= rest
	}
	out := make([]Row, 0, len(free))
	for k, v := range free {
		r := Row{Resource: k.res, Source: k.src, Free: v}
		if k.src == SourceOwn {
			r.PerOrder = c.perOrder[k.res]
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Row) int { return strings.Compare(a.Resource+"/"+a.Source, b.Resource+"/"+b.Source) })
	return out
}

// set writes the rows: free less what was committed since committed was read (a row that
// did not exist then starts from 0), never below 0 (more in flight than the sources hold
// commits nothing until it drains). Rows are written in the lockers' order.
func set(ctx context.Context, pool *pgxpool.Pool, n network.Network, rows []Row, committed map[key]int64) error {
	res, src := make([]string, len(rows)), make([]string, len(rows))
	free, per, k0 := make([]int64, len(rows)), make([]int64, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		res[i], src[i], free[i], per[i], k0[i] = r.Resource, r.Source, r.Free, r.PerOrder, committed[key{r.Resource, r.Source}]
	}
	// Existing rows are locked in the lockers' order first (QueueLock), then written.
	b := &pgx.Batch{}
	// A creation holding the rows (a batch placing its receivers) delays the refresh at
	// most this long: the cycle then reports the failure and publishes its snapshot.
	b.Queue(`SET LOCAL lock_timeout = '1s'`)
	b.Queue(`SELECT 1 FROM supply_commitments WHERE network = $1 ORDER BY resource COLLATE "C", source COLLATE "C" FOR UPDATE`, string(n))
	b.Queue(`INSERT INTO supply_commitments AS s (network, resource, source, free, per_order, committed_total, refreshed_at)
		SELECT $1, t.resource, t.source, greatest(t.free, 0), t.per_order, t.k0, now()
		FROM unnest($2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) WITH ORDINALITY AS t(resource, source, free, per_order, k0, i)
		ORDER BY t.i
		ON CONFLICT (network, resource, source) DO UPDATE
		SET free = greatest(EXCLUDED.free - (s.committed_total - EXCLUDED.committed_total), 0), per_order = EXCLUDED.per_order, refreshed_at = now()`,
		string(n), res, src, free, per, k0)
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
}

// Refresher is the pricer's supply source with supply committed at acceptance: each
// Collect reads the orders in flight, then the sources (supply.Collector), drops the
// offers of providers that refused, refreshes the commitment rows and returns the supply
// for the book. *Refresher satisfies processors/pricer's SupplySource.
type Refresher struct {
	Pool      *pgxpool.Pool
	Network   network.Network
	Collector *supply.Collector
	// MarginBps is the order processor's drift margin (default DefaultMarginBps).
	MarginBps int64
	// Cooldown is how long a refusal keeps a provider out (default DefaultRefusalCooldown).
	Cooldown time.Duration
	Now      func() time.Time // default time.Now

	mu       sync.Mutex
	readings []poolReading // recent pool figures, oldest first
}

// poolReading is one cycle's pool figures: read after start, before end.
type poolReading struct {
	start, end time.Time
	figures    supply.PoolFigures
}

// PoolFigureMaxAge is how old a pool figure the order processor's allocation may use
// (processors/orderflow caches the chain's figures this long). Own capacity is computed
// from a figure read at least this long ago, so that allocation, whose figure is newer,
// never sees less stake than acceptance committed: stake only grows between two figures
// (undelegations), apart from the fills counted in flight.
const PoolFigureMaxAge = time.Second

// dbTimeout bounds each of a refresh's two database steps.
const dbTimeout = 2 * time.Second

// clockMargin covers the difference between this process's clock and the database's
// (fill updated_at), as in allocation.
const clockMargin = 2 * time.Second

// pickReading records fresh figures and returns the newest reading made wholly before
// cutoff (nil: none yet).
func (r *Refresher) pickReading(fresh *poolReading, cutoff time.Time) *poolReading {
	r.mu.Lock()
	defer r.mu.Unlock()
	var use *poolReading
	keep := 0
	for i := range r.readings {
		if !r.readings[i].end.After(cutoff) {
			use, keep = &r.readings[i], i
		}
	}
	var picked *poolReading
	if use != nil {
		p := *use
		picked = &p
	}
	r.readings = slices.Clone(r.readings[keep:]) // the one picked and newer ones
	if fresh != nil {
		r.readings = append(r.readings, *fresh)
	}
	if len(r.readings) > 64 { // cycles far shorter than PoolFigureMaxAge
		r.readings = slices.Delete(r.readings, 1, len(r.readings)-63)
	}
	return picked
}

// Collect is one cycle (see Refresher). A failure to read or write the rows is reported as
// the source "commitments": the book is still published, and the rows keep their last
// values (acceptance keeps decrementing them, so they only err on the side of refusing).
func (r *Refresher) Collect(ctx context.Context) (pricing.Supply, []supply.SourceError) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	cool := r.Cooldown
	if cool <= 0 {
		cool = DefaultRefusalCooldown
	}
	var failures []supply.SourceError
	start := now()
	// Own capacity comes from the newest pool figure read at least PoolFigureMaxAge ago;
	// the fills that landed since it was read count as in flight.
	use := r.pickReading(nil, start.Add(-PoolFigureMaxAge))
	var pools []string
	var landedAfter time.Time
	if use != nil {
		landedAfter = use.start.Add(-clockMargin)
		for _, f := range use.figures {
			for a := range f.Sun {
				pools = append(pools, a)
			}
		}
		slices.Sort(pools)
		pools = slices.Compact(pools)
	}
	// The database work is bounded, so that a slow database delays the cycle's snapshot
	// by a few seconds at most (the snapshot is still published, the rows not refreshed).
	dbctx, cancel := context.WithTimeout(ctx, dbTimeout)
	refused, rerr := Refused(dbctx, r.Pool, r.Network, start.Add(-cool))
	in, ierr := readInFlight(dbctx, r.Pool, r.Network, pools, landedAfter)
	cancel()
	sup, d, fails := r.Collector.CollectDetail(ctx)
	failures = append(failures, fails...)
	if d.Pools != nil {
		r.pickReading(&poolReading{start: start, end: now(), figures: d.Pools}, start.Add(-PoolFigureMaxAge))
	}
	if rerr == nil && len(refused) > 0 {
		kept := sup.Offers[:0:0]
		for _, o := range sup.Offers {
			if o.Class == pricing.ClassMarket && refused[o.Source] {
				continue
			}
			kept = append(kept, o)
		}
		sup.Offers = kept
	}
	if err := errors.Join(rerr, ierr); err != nil {
		return sup, append(failures, supply.SourceError{Source: "commitments", Err: err})
	}
	var figures supply.PoolFigures
	if use != nil {
		figures = use.figures
	}
	c := r.capacity(d, figures, refused, in)
	rows := rowsFrom(c, in)
	// Without a pool figure old enough (the first second after start), or the deep reserve
	// not answering in this cycle, their rows stay as they are: only what was committed
	// since lowers them (nothing else spends own stake); no row yet commits nothing. A
	// provider not answering counts nothing, since its stock may be gone.
	kept := rows[:0]
	for _, row := range rows {
		if (row.Source == SourceOwn && figures == nil && r.Collector.Pool != nil) ||
			(row.Source == SourceDeep && !d.DeepFresh && r.Collector.Deep != nil) {
			continue
		}
		kept = append(kept, row)
	}
	dbctx, cancel = context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	if err := set(dbctx, r.Pool, r.Network, kept, in.committed); err != nil {
		failures = append(failures, supply.SourceError{Source: "commitments", Err: fmt.Errorf("supplystore: refresh: %w", err)})
	}
	return sup, failures
}

// capacity converts what the cycle read fresh to units: each pool's delegatable balance
// less its fills in flight, to whole TRX, net of the margin; each provider that did not
// refuse counts its largest offer of a tier (one purchase is one offer); the deep reserve
// its available energy.
func (r *Refresher) capacity(d supply.Detail, pools supply.PoolFigures, refused map[string]bool, in inFlight) capacity {
	margin := r.MarginBps
	if margin <= 0 {
		margin = DefaultMarginBps
	}
	c := capacity{own: map[string]int64{}, perOrder: map[string]int64{}, market: map[[2]string]int64{}}
	for res, f := range pools {
		if f.Limit <= 0 || f.Weight <= 0 {
			continue
		}
		for addr, sun := range f.Sun {
			avail := (sun - in.poolSun[string(res)][addr]) / tron.SunPerTRX * tron.SunPerTRX
			units, err := tron.EnergyForBalance(avail, f.Limit, f.Weight)
			if err == nil && units > 0 {
				c.own[string(res)] += units * 10_000 / (10_000 + margin)
			}
		}
		// An order's delegation is rounded up to whole TRX in each pool it draws from.
		perTRX, _ := tron.EnergyForBalance(tron.SunPerTRX, f.Limit, f.Weight)
		c.perOrder[string(res)] = perTRX + 1 + int64(len(f.Sun))
	}
	for slug, offers := range d.Providers {
		if refused[slug] {
			continue
		}
		best := map[[2]string]int64{}
		for _, o := range offers {
			k := [2]string{string(o.Resource), string(o.Tier)}
			best[k] = max(best[k], o.Amount)
		}
		for k, v := range best {
			c.market[k] += v
		}
	}
	if d.DeepFresh {
		for _, o := range d.Deep {
			c.deep = max(c.deep, o.Amount)
		}
	}
	return c
}
