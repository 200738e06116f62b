// Package supplystore is supply committed at acceptance (migration 00022, docs/orders.md
// "Supply committed at acceptance"): per network, resource and source the units orders may
// still be accepted against (supply_commitments), and the providers that answered "sold
// out" (provider_refusals). It is the only writer of both tables.
//
// Acceptance locks the rows of the resources it places (QueueLock, after every other lock
// it takes), commits each order against them (Locked.Take) and writes the decrement
// (Locked.QueueTaken) in the same transaction as the orders, so replicas never accept the
// same units twice. The pricer refreshes the rows each cycle (Refresher): it reads the
// rows' committed_total and the orders still in flight in one snapshot, then the chain and
// the providers, then sets free = supply − in flight − (committed since the snapshot), so
// an order accepted while the pricer read the chain is never forgotten, and an order that
// failed releases its units at the next refresh.
package supplystore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rental/schemas/network"
	"rental/schemas/pricing"
)

// The sources of a row: the own stake pools, the providers of one tier (Market), the deep
// reserve. An order is committed against them in the order allocation draws from them:
// own first, the rest from the providers of its tier, else from the deep reserve.
const (
	SourceOwn  = "own"
	SourceDeep = "deep"
)

// Market is the source of the providers' stock of one tier.
func Market(t pricing.Tier) string { return "market:" + string(t) }

// DefaultMarginBps is the drift margin the order processor adds to the staked balance of a
// delegation (processors/orderflow Options.MarginBps): own capacity is counted net of it.
const DefaultMarginBps = 50

// DefaultRefusalCooldown is how long a provider that answered "sold out" stays out of the
// book and of committable supply unless it delivers an order before.
const DefaultRefusalCooldown = 30 * time.Second

// Execer runs a statement: a pool or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

type key struct{ res, src string }

type row struct{ free, perOrder int64 }

// Locked is the network's commitment rows of some resources, locked until the transaction
// ends, with what Take committed against them so far. A row that does not exist (before
// the pricer's first refresh) commits nothing: orders are refused, never accepted blind.
type Locked struct {
	n     network.Network
	rows  map[key]*row
	taken map[key]int64
}

// QueueLock queues the lock of the network's rows of resources (in resource and source
// byte order, the order every writer locks them in). The rows are in the answer once b ran.
func QueueLock(b *pgx.Batch, n network.Network, resources []string) *Locked {
	return queueRows(b, n, resources, " FOR UPDATE")
}

// QueueRead queues a read of the rows without locking them: what Take commits against
// them is then optimistic, and the write QueueTaken queues fails with ErrRaced when a
// concurrent transaction took units in between so that a row would fall below 0. The
// group commit uses it, so that the rows are locked only from its last statement to its
// commit instead of across a client round trip.
func QueueRead(b *pgx.Batch, n network.Network, resources []string) *Locked {
	return queueRows(b, n, resources, "")
}

// Raced reports whether err is QueueTaken's write refused after an optimistic read
// (QueueRead): nothing of the transaction holds, and the orders can be placed again
// against locked rows.
func Raced(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23514" && pe.ConstraintName == "supply_commitments_free_check"
}

func queueRows(b *pgx.Batch, n network.Network, resources []string, lock string) *Locked {
	l := &Locked{n: n, rows: map[key]*row{}, taken: map[key]int64{}}
	res := slices.Clone(resources)
	slices.Sort(res)
	res = slices.Compact(res)
	b.Queue(`SELECT resource, source, free, per_order FROM supply_commitments WHERE network = $1 AND resource = ANY($2)
		ORDER BY resource COLLATE "C", source COLLATE "C"`+lock, string(n), res).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var k key
			var r row
			if err := rows.Scan(&k.res, &k.src, &r.free, &r.perOrder); err != nil {
				return err
			}
			l.rows[k] = &r
		}
		return rows.Err()
	})
	return l
}

// Lock is QueueLock run at once in tx.
func Lock(ctx context.Context, tx pgx.Tx, n network.Network, resources []string) (*Locked, error) {
	b := &pgx.Batch{}
	l := QueueLock(b, n, resources)
	return l, tx.SendBatch(ctx, b).Close()
}

func (l *Locked) get(res, src string) *row {
	if r, ok := l.rows[key{res, src}]; ok {
		return r
	}
	return &row{}
}

func (l *Locked) take(res, src string, n int64) {
	if n <= 0 {
		return
	}
	l.get(res, src).free -= n
	l.taken[key{res, src}] += n
}

// Take commits amount units of resource at tier when the rows hold them and reports
// whether it did: from the own pools first (each order there also holds per_order units,
// the whole-TRX rounding of its delegation), the rest whole from the providers of the tier
// or else whole from the deep reserve, as allocation draws. spill false (a deployment that
// fills orders from its own pools only) commits from the own pools alone.
func (l *Locked) Take(resource, tier string, amount int64, spill bool) bool {
	own := l.get(resource, SourceOwn)
	usable := max(own.free-own.perOrder, 0)
	if usable >= amount {
		l.take(resource, SourceOwn, amount+own.perOrder)
		return true
	}
	if !spill {
		return false
	}
	rest := amount - usable
	var src string
	switch {
	case l.get(resource, Market(pricing.Tier(tier))).free >= rest:
		src = Market(pricing.Tier(tier))
	case l.get(resource, SourceDeep).free >= rest:
		src = SourceDeep
	default:
		return false
	}
	if usable > 0 {
		l.take(resource, SourceOwn, usable+own.perOrder)
	}
	l.take(resource, src, rest)
	return true
}

// Available is the largest amount Take would commit now for an order of resource at tier.
func (l *Locked) Available(resource, tier string, spill bool) int64 {
	own := l.get(resource, SourceOwn)
	usable := max(own.free-own.perOrder, 0)
	if !spill {
		return usable
	}
	return usable + max(l.get(resource, Market(pricing.Tier(tier))).free, l.get(resource, SourceDeep).free, 0)
}

// Free is what the row of resource and source holds now (after Take), 0 when missing.
func (l *Locked) Free(resource, source string) int64 { return max(l.get(resource, source).free, 0) }

// QueueTaken queues the write of what Take committed: free down, committed_total up. After
// QueueRead it fails (Raced) when a row would fall below 0.
func (l *Locked) QueueTaken(b *pgx.Batch) {
	if len(l.taken) == 0 {
		return
	}
	ks := make([]key, 0, len(l.taken))
	for k := range l.taken {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b key) int { return strings.Compare(a.res+"/"+a.src, b.res+"/"+b.src) })
	var res, src []string
	var n []int64
	for _, k := range ks { // in the lockers' order
		res, src, n = append(res, k.res), append(src, k.src), append(n, l.taken[k])
	}
	// Several rows are locked in the lockers' order first (a no-op after QueueLock), so
	// that the UPDATE's plan never decides the order and writers cannot deadlock on them.
	if len(ks) > 1 {
		b.Queue(`SELECT 1 FROM supply_commitments s JOIN unnest($2::text[], $3::text[]) AS t(resource, source)
			ON s.resource = t.resource AND s.source = t.source
			WHERE s.network = $1 ORDER BY s.resource COLLATE "C", s.source COLLATE "C" FOR UPDATE OF s`, string(l.n), res, src)
	}
	b.Queue(`UPDATE supply_commitments s SET free = s.free - t.n, committed_total = s.committed_total + t.n
		FROM unnest($2::text[], $3::text[], $4::bigint[]) AS t(resource, source, n)
		WHERE s.network = $1 AND s.resource = t.resource AND s.source = t.source`, string(l.n), res, src, n)
	l.taken = map[key]int64{}
}

// ---- providers that refused ----

// RecordRefusal notes that provider answered "sold out" at at, in the caller's transaction.
func RecordRefusal(ctx context.Context, q Execer, n network.Network, provider string, at time.Time) error {
	_, err := q.Exec(ctx, `INSERT INTO provider_refusals (network, provider, refused_at) VALUES ($1, $2, $3)
		ON CONFLICT (network, provider) DO UPDATE SET refused_at = greatest(provider_refusals.refused_at, EXCLUDED.refused_at)`,
		string(n), provider, at)
	return err
}

// ClearRefusal notes that provider delivered: it is listed again from the next cycle.
func ClearRefusal(ctx context.Context, q Execer, n network.Network, provider string) error {
	_, err := q.Exec(ctx, `DELETE FROM provider_refusals WHERE network = $1 AND provider = $2`, string(n), provider)
	return err
}

// Querier reads: a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Refused is the providers of the network that refused at or after since.
func Refused(ctx context.Context, q Querier, n network.Network, since time.Time) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT provider FROM provider_refusals WHERE network = $1 AND refused_at >= $2`, string(n), since)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, s := range names {
		out[s] = true
	}
	return out, nil
}

// Row is one commitment row as the pricer reads it (GET of the state, tests, metrics).
type Row struct {
	Resource, Source string
	Free, PerOrder   int64
	CommittedTotal   int64
}

// Rows are the network's rows in resource and source order.
func Rows(ctx context.Context, q Querier, n network.Network) ([]Row, error) {
	rows, err := q.Query(ctx, `SELECT resource, source, free, per_order, committed_total FROM supply_commitments WHERE network = $1
		ORDER BY resource, source`, string(n))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var x Row
		return x, r.Scan(&x.Resource, &x.Source, &x.Free, &x.PerOrder, &x.CommittedTotal)
	})
}
