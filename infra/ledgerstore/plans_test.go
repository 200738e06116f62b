package ledgerstore

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"

	"rental/infra/accounts"
	"rental/infra/pg"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/network"
)

// A partial index over the rows in flight counts as empty after a VACUUM that found
// nothing in flight, however many rows it holds afterwards (pg/plans.go). Captures and
// releases still find their holds by key with thousands of holds placed since; stated the
// plain way, the same lookup reads every open hold.
func TestHoldsFoundByKeyAfterAQuietVacuum(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	store, err := accounts.New(db.Pool, accounts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b [20]byte
	_, _ = rand.Read(b[:])
	owner, _ := tron.AddressFromBytes(b[:])
	a, _, err := store.CreateOrGetByOwner(ctx, network.Nile, owner, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO ledger_holds (ref, account_id, amount_sun, status, expires_at)
		SELECT 'closed-' || g, $1, 1000, 'captured', now() FROM generate_series(1, 100) g`, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO ledger_holds (ref, account_id, amount_sun, status, expires_at)
		SELECT 'open-' || g, $1, 1000, 'placed', now() + interval '1 hour' FROM generate_series(1, 3000) g`, a.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		sql  string
		args []any
	}{
		{"a capture", captureHoldSQL, []any{"open-7", int64(1000)}},
		{"a release", releaseHoldSQL, []any{"open-7"}},
		{"a group's captures", groupCaptureSQL, []any{[]string{"open-7", "open-8"}, []string{a.ID, a.ID}, []int64{1000, 1000},
			[]int64{0, 0}, []string{"customer:" + a.ID, "customer:" + a.ID}, []string{"capture:open-7", "capture:open-8"}, "capture", "revenue"}},
		{"the plain lookup (the trap, for contrast)", `UPDATE ledger_holds SET status = 'released' WHERE ref = $1 AND status = 'placed'`, []any{"open-7"}},
	} {
		plan, err := pg.Plan(ctx, db.Pool, c.sql, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		byKey := strings.Contains(plan, `"Index Name": "ledger_holds_pkey"`) && !strings.Contains(plan, `"Index Name": "ledger_holds_open"`)
		if trap := strings.HasPrefix(c.name, "the plain"); byKey == trap {
			t.Errorf("%s: found by key %v, want %v: %s", c.name, byKey, !trap, plan)
		}
	}
}
