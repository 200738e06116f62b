package health

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Database is what the database and payments components read.
type Database interface {
	// Ping succeeds when the database answers a round trip.
	Ping(ctx context.Context) error
	// ScannerAge is the time since the chain follower's cursor last moved; ok is false
	// when the follower has not written a cursor yet.
	ScannerAge(ctx context.Context) (age time.Duration, ok bool, err error)
}

// ScannerProblems is a Database that also reads the chain follower's standing complaint
// about its node (chain_cursor.problem: another chain, a head below the cursor).
type ScannerProblems interface {
	ScannerProblem(ctx context.Context) (string, error)
}

// ScannerCursorName is the chain_cursor row chainwatch writes.
const ScannerCursorName = "chainwatch"

// probeTimeout bounds each query, so a hung database shows as down within the status
// request rather than holding it.
const probeTimeout = time.Second

// Postgres probes a pgx pool.
type Postgres struct{ pool *pgxpool.Pool }

// NewPostgres returns the probes over pool.
func NewPostgres(pool *pgxpool.Pool) *Postgres { return &Postgres{pool: pool} }

// Ping acquires a connection and runs an empty statement.
func (p *Postgres) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return p.pool.Ping(ctx)
}

// ScannerAge is measured on the database clock (now() - updated_at), so clock skew between
// this process and the writer does not distort it. A cursor in the future counts as 0.
func (p *Postgres) ScannerAge(ctx context.Context) (time.Duration, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var ms int64
	err := p.pool.QueryRow(ctx,
		`SELECT GREATEST(0, floor(extract(epoch FROM now() - updated_at) * 1000))::bigint
		   FROM chain_cursor WHERE name = $1`, ScannerCursorName).Scan(&ms)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}

// ScannerProblem returns chainwatch's standing complaint about its node, "" when none.
func (p *Postgres) ScannerProblem(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var problem *string
	err := p.pool.QueryRow(ctx, `SELECT problem FROM chain_cursor WHERE name = $1`, ScannerCursorName).Scan(&problem)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil || problem == nil {
		return "", err
	}
	return *problem, nil
}
