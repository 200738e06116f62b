package pg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"rental/infra/pg"
	"rental/infra/testenv"
)

// A transaction begun inside a batch commits what it wrote, rolls back to a savepoint
// without losing the rest, rolls back whole, and reports a commit that the server turned
// into a rollback.
func TestInBatchTx(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE bt (v int)`); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		t.Helper()
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM bt`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	begin := func() (pgx.Tx, func()) {
		t.Helper()
		c, err := db.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO bt VALUES (1)`)
		tx, err := pg.BeginWith(ctx, c.Conn(), b)
		if err != nil {
			t.Fatal(err)
		}
		return tx, c.Release
	}

	// Commit, with a savepoint rolled back in between.
	tx, release := begin()
	sp, err := tx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Exec(ctx, `INSERT INTO bt VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	if err := sp.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sp.Commit(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("a closed savepoint committed: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("rollback after commit: %v", err)
	}
	release()
	if n := count(); n != 1 {
		t.Fatalf("%d rows after commit, want the batch's one", n)
	}

	// Rollback.
	tx, release = begin()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	release()
	if n := count(); n != 1 {
		t.Fatalf("%d rows after rollback, want 1", n)
	}

	// A failed statement leaves the transaction aborted: COMMIT rolls back, and says so.
	tx, release = begin()
	if _, err := tx.Exec(ctx, `INSERT INTO bt VALUES ('x')`); err == nil {
		t.Fatal("a bad insert passed")
	}
	if err := tx.Commit(ctx); !errors.Is(err, pgx.ErrTxCommitRollback) {
		t.Fatalf("commit of an aborted transaction: %v", err)
	}
	release()
	if n := count(); n != 1 {
		t.Fatalf("%d rows after an aborted transaction, want 1", n)
	}

	// COMMIT in the batch of the last statements.
	tx, release = begin()
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO bt VALUES (2)`)
	committed := pg.QueueCommit(b, tx)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if err := committed(); err != nil {
		t.Fatalf("queued commit: %v", err)
	}
	if err := tx.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatalf("rollback after a queued commit: %v", err)
	}
	release()
	if n := count(); n != 3 {
		t.Fatalf("%d rows after a queued commit, want 3", n)
	}

	// A batch that fails after BEGIN leaves no transaction behind, and writes nothing.
	c0, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b = &pgx.Batch{}
	b.Queue(`INSERT INTO bt VALUES (4)`)
	b.Queue(`INSERT INTO bt VALUES ('x')`)
	if _, err := pg.BeginWith(ctx, c0.Conn(), b); err == nil {
		t.Fatal("a failing batch began a transaction")
	}
	if s := c0.Conn().PgConn().TxStatus(); s != 'I' {
		t.Fatalf("connection left in transaction status %c", s)
	}
	c0.Release()
	if n := count(); n != 3 {
		t.Fatalf("%d rows after a failed batch, want 3", n)
	}

	// Not in a transaction: refused.
	c, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := pg.InBatchTx(c.Conn()); err == nil {
		t.Fatal("a connection outside a transaction was adopted")
	}
}
