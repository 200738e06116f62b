package pg

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// BeginWith begins a transaction on conn with b's statements in the same round trip (it
// queues BEGIN before them) and returns the transaction (InBatchTx). When b fails, the
// transaction is rolled back and b's error returned. End it with Commit, or with
// QueueCommit in the batch of its last statements.
func BeginWith(ctx context.Context, conn *pgx.Conn, b *pgx.Batch) (pgx.Tx, error) {
	b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: "BEGIN"}}, b.QueuedQueries...)
	berr := conn.SendBatch(ctx, b).Close()
	tx, err := InBatchTx(conn)
	if err != nil {
		return nil, errors.Join(berr, err) // BEGIN did not take effect: nothing to end
	}
	if berr != nil {
		_ = tx.Rollback(ctx)
		return nil, berr
	}
	return tx, nil
}

// QueueCommit queues COMMIT as the last statement of b, to end tx (a transaction of
// BeginWith or InBatchTx) in b's round trip instead of one of its own. Once b ran, the
// function returned tells the outcome: nil when it committed (tx is then closed),
// pgx.ErrTxCommitRollback when the server rolled back instead (closed too), an error when
// COMMIT did not run (tx is left open, for its Rollback).
func QueueCommit(b *pgx.Batch, tx pgx.Tx) (outcome func() error) {
	t, ok := tx.(*batchTx)
	if !ok {
		return func() error { return errors.New("pg: QueueCommit needs a transaction begun in a batch") }
	}
	var tag string
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		tag = ct.String()
		return nil
	})
	return func() error {
		switch tag {
		case "COMMIT":
			t.closed = true
			return nil
		case "ROLLBACK":
			t.closed = true
			return pgx.ErrTxCommitRollback
		}
		return errors.New("pg: the batch's COMMIT did not run")
	}
}

// InBatchTx is the transaction a batch began on conn: the batch queued BEGIN first and
// its first statements with it, saving the round trip pgx.Conn.Begin would take. It
// behaves as pgx's own transaction (Begin makes a savepoint; Commit and Rollback end it
// once, and again are ErrTxClosed) except for LargeObjects, which it does not offer. A
// Rollback that fails closes conn, so that its pool drops it.
func InBatchTx(conn *pgx.Conn) (pgx.Tx, error) {
	if s := conn.PgConn().TxStatus(); s != 'T' && s != 'E' {
		return nil, errors.New("pg: the connection is not in a transaction")
	}
	return &batchTx{conn: conn}, nil
}

type batchTx struct {
	conn       *pgx.Conn
	savepoints int64
	closed     bool
}

func (t *batchTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	t.savepoints++
	sp := &savepoint{batchTx: t, name: "sp_" + strconv.FormatInt(t.savepoints, 10)}
	if _, err := t.conn.Exec(ctx, "SAVEPOINT "+sp.name); err != nil {
		return nil, err
	}
	return sp, nil
}

func (t *batchTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	tag, err := t.conn.Exec(ctx, "COMMIT")
	t.closed = true
	if err != nil {
		if t.conn.PgConn().TxStatus() != 'I' {
			_ = t.conn.Close(ctx) // the transaction's outcome is unknown: the connection goes
		}
		return err
	}
	if tag.String() == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *batchTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	t.closed = true
	if err != nil {
		_ = t.conn.Close(ctx) // the transaction may still be open: the connection goes
	}
	return err
}

func (t *batchTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *batchTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

func (t *batchTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *batchTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

func (t *batchTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *batchTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *batchTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *batchTx) Conn() *pgx.Conn { return t.conn }

// savepoint is a transaction nested in a batchTx; statements go to the batchTx's
// connection.
type savepoint struct {
	*batchTx
	name   string
	closed bool
}

func (s *savepoint) Begin(ctx context.Context) (pgx.Tx, error) {
	if s.closed {
		return nil, pgx.ErrTxClosed
	}
	return s.batchTx.Begin(ctx)
}

func (s *savepoint) Commit(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	_, err := s.conn.Exec(ctx, "RELEASE SAVEPOINT "+s.name)
	s.closed = true
	return err
}

func (s *savepoint) Rollback(ctx context.Context) error {
	if s.closed {
		return pgx.ErrTxClosed
	}
	_, err := s.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+s.name)
	s.closed = true
	return err
}
