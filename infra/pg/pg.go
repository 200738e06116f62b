// Package pg is the Postgres adapter: the connection pool, the embedded schema migrations and
// helpers for transactions. Every piece of state that money depends on lives here.
package pg

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"rental/infra/depstate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the embedded migration set, exposed so tests can fingerprint it.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	return sub
}

// Connect opens a pool and checks it answers. The error names the fix, because the most
// common cause on a developer machine is a stopped server.
func Connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	return connect(ctx, dsn, "", 0)
}

// ConnectStage is Connect for a stage: its connections are named application_name
// "rental-<stage>" (so pg_stat_activity tells the stages apart), and it has maxConns of
// them to do its work concurrently. The DSN's own pool_max_conns or application_name wins
// (the operator's word); maxConns 0 keeps pgx's default (the larger of 4 and the CPUs).
func ConnectStage(ctx context.Context, dsn, stage string, maxConns int32) (*pgxpool.Pool, error) {
	return connect(ctx, dsn, stage, maxConns)
}

func connect(ctx context.Context, dsn, stage string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: DATABASE_URL is not a valid connection string: %w", err)
	}
	if maxConns > 0 && !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = maxConns
	}
	if stage != "" && cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "rental-" + stage
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, Unreachable(dsn, err)
	}
	return pool, nil
}

// Unreachable wraps a connection failure with the command that starts a local server.
func Unreachable(dsn string, err error) error {
	return fmt.Errorf("postgres at %s is unreachable (%v); start it with: "+
		"pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start, "+
		"or set DATABASE_URL", Redact(dsn), err)
}

// Redact hides the password of a connection URL for logs.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// EnsureDatabase creates the database named in dsn when it does not exist yet, connecting
// through the server's maintenance database. The dev stack calls it so that a fresh machine
// needs no manual createdb.
func EnsureDatabase(ctx context.Context, dsn string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("postgres: DATABASE_URL: %w", err)
	}
	name := cfg.Database
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return Unreachable(dsn, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM pg_database WHERE datname=$1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // created concurrently
		return nil
	}
	return err
}

// Migrate applies every pending embedded migration. It is safe to run from several
// processes at once: goose serialises through a Postgres advisory lock.
func Migrate(ctx context.Context, dsn string) ([]string, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: DATABASE_URL: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	return migrateDB(ctx, db)
}

func migrateDB(ctx context.Context, db *sql.DB) ([]string, error) {
	locker, err := newLocker()
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, Migrations(), goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var applied []string
	for _, r := range res {
		applied = append(applied, r.Source.Path)
	}
	return applied, nil
}

// TxBeginner is what BeginTxFunc begins a transaction on (*pgxpool.Pool, *pgx.Conn).
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// BeginTxFunc is pgx.BeginTxFunc with every error met before COMMIT was sent (BEGIN's,
// fn's) marked depstate.Uncommitted: the transaction's writes did not take effect, so a
// lost session there means nothing was stored. COMMIT's own error stays unmarked: its
// outcome is unknown.
func BeginTxFunc(ctx context.Context, db TxBeginner, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return depstate.Uncommitted(err)
	}
	if err := fn(tx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
		return depstate.Uncommitted(err)
	}
	return tx.Commit(ctx)
}

// InTx runs fn in a transaction and commits it when fn returns nil. Retries belong to the
// caller, which knows whether fn is safe to run twice.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, fn)
}

// IsUniqueViolation reports a unique-constraint failure, optionally of one constraint.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	return constraint == "" || strings.EqualFold(pgErr.ConstraintName, constraint)
}

// NewestFirst builds the query of a list page of one account's rows, newest first by
// created_at then id (both descending: a total order, so a keyset cursor never skips or
// repeats a row). Add filters with Where and Arg, a cursor with After, then take the
// query from Page.
type NewestFirst struct {
	where []string
	args  []any
}

// NewNewestFirst starts a page query of accountID's rows (column account_id).
func NewNewestFirst(accountID string) *NewestFirst {
	return &NewestFirst{where: []string{"account_id = $1"}, args: []any{accountID}}
}

// Arg adds a query argument and returns its placeholder.
func (q *NewestFirst) Arg(v any) string {
	q.args = append(q.args, v)
	return fmt.Sprintf("$%d", len(q.args))
}

// Where adds a condition (its arguments taken with Arg).
func (q *NewestFirst) Where(cond string) { q.where = append(q.where, cond) }

// After continues the page after the row at (createdAt, id), a cursor's position.
func (q *NewestFirst) After(createdAt time.Time, id string) {
	q.Where("(created_at, id) < (" + q.Arg(createdAt) + ", " + q.Arg(id) + ")")
}

// Page returns the query selecting columns of table, one row more than limit: the caller
// knows from it whether a next page exists.
func (q *NewestFirst) Page(columns, table string, limit int) (string, []any) {
	sql := `SELECT ` + columns + ` FROM ` + table + ` WHERE ` + strings.Join(q.where, " AND ") +
		` ORDER BY created_at DESC, id DESC LIMIT ` + q.Arg(limit+1)
	return sql, q.args
}
