package pg

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
