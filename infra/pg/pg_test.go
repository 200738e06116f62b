package pg_test

import (
	"context"
	"testing"

	"rental/infra/pg"
	"rental/infra/testenv"
)

func TestMigrateIsIdempotentAndClonesAreIsolated(t *testing.T) {
	ctx := context.Background()
	a := testenv.Postgres(t)
	b := testenv.Postgres(t)

	// The clone is already migrated: a second run applies nothing.
	applied, err := pg.Migrate(ctx, a.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 0 {
		t.Fatalf("template clone was not fully migrated; applied again: %v", applied)
	}
	if _, err := a.Pool.Exec(ctx, `INSERT INTO chain_cursor(name, block_num, block_hash) VALUES ('x', 1, 'h')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.Pool.QueryRow(ctx, `SELECT count(*) FROM chain_cursor`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("databases of two tests share rows: %d", n)
	}
}

func TestEnsureDatabaseCreatesMissing(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	url := db.URL[:len(db.URL)-len(db.Name)-len("?sslmode=disable")] + db.Name + "_extra?sslmode=disable"
	if err := pg.EnsureDatabase(ctx, url); err != nil {
		t.Fatal(err)
	}
	if err := pg.EnsureDatabase(ctx, url); err != nil {
		t.Fatalf("second call must be a no-op: %v", err)
	}
	p, err := pg.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := db.Pool.Exec(ctx, `DROP DATABASE `+db.Name+`_extra`); err != nil {
		t.Fatal(err)
	}
}
