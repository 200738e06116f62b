// Package testenv gives integration tests real services: a Postgres database of their own
// cloned from a migrated template, a Redis namespace, and an embedded Kafka broker reached
// over TCP. Services come from DATABASE_URL and REDIS_URL; when those are unset it tries
// testcontainers, and skips only when neither is available. CI always sets the variables,
// so no test skips there.
package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/pg"
)

// DB is a freshly cloned, fully migrated database for one test.
type DB struct {
	Pool *pgxpool.Pool
	URL  string
	Name string
}

var (
	baseOnce sync.Once
	baseURL  string
	baseErr  error
)

// Postgres returns a database of the test's own, dropped when the test ends.
func Postgres(t testing.TB) *DB {
	t.Helper()
	baseOnce.Do(func() { baseURL, baseErr = postgresURL() })
	if baseErr != nil {
		t.Fatalf("postgres: %v", baseErr)
	}
	if baseURL == "" {
		skipNoService(t, "postgres", "DATABASE_URL")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	tmpl, err := template(ctx, baseURL)
	if err != nil {
		t.Fatalf("postgres template: %v", err)
	}
	name := fmt.Sprintf("t_%s_%d", tmpl[len(tmpl)-8:], time.Now().UnixNano())
	admin, err := pgx.Connect(ctx, withDB(baseURL, "postgres"))
	if err != nil {
		t.Fatalf("postgres: %v", pg.Unreachable(baseURL, err))
	}
	defer admin.Close(ctx)
	// CREATE DATABASE ... TEMPLATE needs the template free of other sessions; creation by
	// parallel test binaries is serialised with an advisory lock for that reason.
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(7366104222)`); err != nil {
		t.Fatal(err)
	}
	_, err = admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s TEMPLATE %s`, ident(name), ident(tmpl)))
	_, _ = admin.Exec(ctx, `SELECT pg_advisory_unlock(7366104222)`)
	if err != nil {
		t.Fatalf("clone template: %v", err)
	}
	url := withDB(baseURL, name)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, withDB(baseURL, "postgres"))
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, ident(name)))
	})
	return &DB{Pool: pool, URL: url, Name: name}
}

// template returns the name of a database migrated to the current embedded migrations,
// creating it once per migration set. The name carries a hash of the migration files, so a
// changed migration never reuses a stale template.
func template(ctx context.Context, base string) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(pg.Migrations(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(pg.Migrations(), path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	if err != nil {
		return "", err
	}
	name := "tmpl_" + hex.EncodeToString(h.Sum(nil))[:16]

	admin, err := pgx.Connect(ctx, withDB(base, "postgres"))
	if err != nil {
		return "", pg.Unreachable(base, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(7366104222)`); err != nil {
		return "", err
	}
	defer admin.Exec(context.Background(), `SELECT pg_advisory_unlock(7366104222)`)
	var ready bool
	err = admin.QueryRow(ctx, `SELECT EXISTS(SELECT 1 FROM pg_database WHERE datname=$1 AND datistemplate)`, name).Scan(&ready)
	if err != nil || ready {
		return name, err
	}
	_, _ = admin.Exec(ctx, fmt.Sprintf(`DROP DATABASE IF EXISTS %s WITH (FORCE)`, ident(name)))
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %s`, ident(name))); err != nil {
		return "", err
	}
	if _, err := pg.Migrate(ctx, withDB(base, name)); err != nil {
		return "", err
	}
	// Marked as template only once fully migrated, so a crash mid-way is retried next time.
	if _, err := admin.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %s WITH IS_TEMPLATE true`, ident(name))); err != nil {
		return "", err
	}
	return name, nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// withDB replaces the database name of a postgres URL.
func withDB(dsn, db string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return dsn
	}
	// Rebuild from the parsed config so key=value and URL forms both work.
	pw := ""
	if cfg.Password != "" {
		pw = ":" + cfg.Password
	}
	q := "sslmode=disable"
	if i := strings.Index(dsn, "?"); i >= 0 {
		q = dsn[i+1:]
	}
	return fmt.Sprintf("postgres://%s%s@%s:%d/%s?%s", cfg.User, pw, cfg.Host, cfg.Port, db, q)
}

func postgresURL() (string, error) {
	if v := os.Getenv("DATABASE_URL"); v != "" {
		return v, nil
	}
	return containerPostgres()
}
