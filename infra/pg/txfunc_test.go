package pg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"rental/infra/depstate"
	"rental/infra/pg"
	"rental/infra/testenv"
)

// A transaction whose session the server ends before COMMIT (pg_terminate_backend sends
// the same 57P01 a Postgres shutdown does) stored nothing, and its error says so; an
// ordinary statement error in the same place does not pass for an outage.
func TestBeginTxFuncSessionEndedBeforeCommitIsNothingStored(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE txfunc_probe (v int)`); err != nil {
		t.Fatal(err)
	}
	err := pg.BeginTxFunc(ctx, db.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO txfunc_probe VALUES (1)`); err != nil {
			return err
		}
		var pid int
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		if _, err := db.Pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO txfunc_probe VALUES (2)`)
		return err
	})
	if err == nil || !depstate.NothingStored(err) {
		t.Fatalf("err %v: want a lost session counted as nothing stored", err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM txfunc_probe`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows stored by a transaction reported as nothing stored", n)
	}

	err = pg.BeginTxFunc(ctx, db.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO no_such_table VALUES (1)`)
		return err
	})
	if err == nil || depstate.NothingStored(err) {
		t.Fatalf("err %v: a defect passed for a dependency outage", err)
	}
	if err := pg.BeginTxFunc(ctx, db.Pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO txfunc_probe VALUES (3)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM txfunc_probe`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("committed transaction: %d rows, err %v", n, err)
	}
}
