package pg

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// IndexPlans is a statement that makes the rest of its transaction plan every statement
// once per connection (a cached generic plan) and by its indexes (sequential scans priced
// out), for the hot paths whose every access is an index lookup by key: the group commit
// of order creation and the outbox relay.
//
// Why not the default: a generic plan made while a table was small (a fresh database)
// scans the whole table, and keeps doing so as it grows until an ANALYZE invalidates it
// (the relay once read 38 M outbox tuples per run that way). Planning each statement for
// its values instead avoids that but costs more than running it: in the orders bench,
// planning was a quarter of the group commit's time in Postgres and more than the relay's
// execution. Priced out, a sequential scan is chosen only where no index applies.
const IndexPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)`

// Key lookups and the in-flight partial indexes.
//
// Several tables have a partial index over their rows in flight (order_fills_in_flight,
// ledger_holds_open, signed_txs_unsettled, orders_in_flight, ...). Postgres estimates such
// an index's size from the row count its last VACUUM or ANALYZE saw, scaled by its pages:
// vacuumed at a quiet moment, with nothing in flight, it counts as empty until the next
// one, however many rows it holds meanwhile. A statement that finds a row by its key and
// also states the row's in-flight status (WHERE ref = $1 AND status = 'placed') implies
// the partial index's predicate, so the planner may read that "empty" index whole and
// filter by the key instead of using the primary key, reading every row in flight for
// each row it wants (figures in docs/order-processing.md, "Sixth round"). Statements that
// look rows up by their key therefore keep the status out of what the planner can match
// to a partial index: as a guard written (status = 'placed') IS TRUE, the same test for a
// NOT NULL column, or inside the aggregate (FILTER) when the statement sums or collects
// the rows of one key.

// Plan is the plan Postgres would run sql with args by (EXPLAIN, as JSON), for tests that
// hold a statement to its indexes.
func Plan(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, sql string, args ...any) (string, error) {
	var plan string
	err := q.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan)
	return plan, err
}
