package orderstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"rental/infra/pg"
	"rental/infra/testenv"
)

// vacuumedWhileQuiet leaves the database as a deployment's autovacuum may: every table
// vacuumed and analyzed while nothing was in flight (the in-flight partial indexes counted
// empty), then n orders in flight, each with a fill broadcast and a delegation signed but
// not yet answered. It returns the ids of the orders in flight.
func vacuumedWhileQuiet(t *testing.T, db *testenv.DB, n int) []string {
	t.Helper()
	ctx := context.Background()
	acc := testAccount(t, db.Pool)
	first := insertOrders(t, db, acc, 1, func(int) time.Time { return time.Now() })[0]
	if _, err := db.Pool.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		t.Fatal(err)
	}
	var ids []string
	if err := db.Pool.QueryRow(ctx, `WITH o AS (
			INSERT INTO orders SELECT (jsonb_populate_record(o, jsonb_build_object('id', o.id || '-' || g,
				'client_order_id', 'flight-' || g, 'status', 'allocating'))).*
			FROM orders o, generate_series(1, $2) g WHERE o.id = $1 RETURNING id
		), f AS (
			INSERT INTO order_fills (order_id, seq, source, pool_address, amount, balance_sun, state, delegate_txid)
			SELECT id, 0, 'pool', 'TPool', 100000, 1000000, 'broadcast', 'tx-' || id FROM o
		), s AS (
			INSERT INTO signed_txs (txid, order_id, purpose, fill_seq, attempt, signer, tx, expiration, state)
			SELECT 'tx-' || id, id, 'delegate', 0, 0, 'TPool', '{}', now() + interval '1 minute', 'signed' FROM o
		)
		SELECT array_agg(id) FROM o`, first, n).Scan(&ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

// mustUseKey fails unless sql (run with args) reaches its rows through the index key and
// never through the partial index trap.
func mustUseKey(t *testing.T, db *testenv.DB, name, key, trap, sql string, args ...any) {
	t.Helper()
	plan, err := pg.Plan(context.Background(), db.Pool, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !strings.Contains(plan, `"Index Name": "`+key+`"`) || strings.Contains(plan, `"Index Name": "`+trap+`"`) {
		t.Errorf("%s does not find its rows by %s (or reads %s whole): %s", name, key, trap, plan)
	}
}

// A partial index over the rows in flight counts as empty after a VACUUM that found
// nothing in flight, however many rows it holds afterwards (pg/plans.go). The statements
// of every broadcast mark still find their rows by key; stated the plain way, the same
// lookup reads the whole in-flight index.
func TestMarksFindRowsByKeyAfterAQuietVacuum(t *testing.T) {
	db := testenv.Postgres(t)
	ids := vacuumedWhileQuiet(t, db, 3000)
	one := ids[:2]
	mustUseKey(t, db, "the broadcast answers", "signed_txs_pkey", "signed_txs_unsettled", markAnswersSQL,
		[]string{"tx-" + one[0], "tx-" + one[1]}, []string{"broadcast", "broadcast"}, []*string{nil, nil})
	mustUseKey(t, db, "the orders made delegated", "order_fills_pkey", "order_fills_in_flight", markDelegatedManySQL,
		one, "delegated", time.Now())
	mustUseKey(t, db, "an order's broadcast hashes", "order_fills_pkey", "order_fills_in_flight", broadcastHashesSQL, one[0])

	// The trap is there: the same lookup with the state as a plain condition.
	plan, err := pg.Plan(context.Background(), db.Pool,
		`SELECT array_agg(delegate_txid) FROM order_fills WHERE order_id = $1 AND state = 'broadcast'`, one[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, `"Index Name": "order_fills_in_flight"`) {
		t.Fatalf("the setup does not reproduce the quiet VACUUM: the plain lookup plans %s", plan)
	}
}
