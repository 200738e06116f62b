// Command migrate applies the embedded schema migrations to DATABASE_URL, creating the
// database first when it does not exist. Safe to run from several places at once.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"rental/infra/config"
	"rental/infra/pg"
)

func main() {
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
	applied, err := pg.Migrate(ctx, cfg.DatabaseURL)
	if err != nil {
		log.Error("migrations failed", "err", err)
		os.Exit(1)
	}
	log.Info("migrations applied", "count", len(applied), "files", applied, "database", pg.Redact(cfg.DatabaseURL))
}
