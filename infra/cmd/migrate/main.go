// Command migrate applies the embedded schema migrations to DATABASE_URL, creating the
// database first when it does not exist. Safe to run from several places at once.
//
// With -reset it first drops every table of the database's public schema: `make reset`
// uses it to start the dev stack's chain (DATA_DIR) and its database afresh together,
// which chainwatch asks for when they no longer belong to each other.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/config"
	"rental/infra/pg"
)

func main() {
	reset := flag.Bool("reset", false, "drop every table of DATABASE_URL's public schema first (dev stack: make reset)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("stage", "migrate")
	cfg, err := config.Load()
	if err != nil {
		log.Error("configuration", "err", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := pg.EnsureDatabase(ctx, cfg.DatabaseURL); err != nil {
		log.Error("database", "err", err)
		os.Exit(1)
	}
	if *reset {
		if err := dropPublic(ctx, cfg.DatabaseURL); err != nil {
			log.Error("reset", "err", err)
			os.Exit(1)
		}
		log.Warn("every table dropped", "database", pg.Redact(cfg.DatabaseURL))
	}
	applied, err := pg.Migrate(ctx, cfg.DatabaseURL)
	if err != nil {
		log.Error("migrations failed", "err", err)
		os.Exit(1)
	}
	log.Info("migrations applied", "count", len(applied), "files", applied, "database", pg.Redact(cfg.DatabaseURL))
}

// dropPublic empties the public schema.
func dropPublic(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`)
	return err
}
