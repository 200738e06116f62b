// Command chainwatch runs the chain follower as its own process: it reads confirmed blocks
// from TRON_NODE_URL and writes chain facts to the outbox in DATABASE_URL. It never talks
// to Kafka; the outbox relay (a separate stage) publishes what it commits. One replica is
// enough; a second one is safe (the cursor row serialises them) but adds nothing.
//
// Configuration comes from the environment (infra/config): DATABASE_URL, TRON_NODE_URL,
// NETWORK, CONFIRMATIONS, CHAIN_POLL_INTERVAL. Flags cover what only this stage needs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"rental/chainwatch"
	"rental/infra/config"
	"rental/infra/outbox"
	"rental/infra/pg"
	"rental/infra/tron"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("chainwatch stopped", "stage", "chainwatch", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	var (
		metricsAddr = flag.String("metrics-addr", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9101); empty disables")
		usdt        = flag.String("usdt-contract", "", "TRC-20 USDT contract to follow (default: the NETWORK's; set it for a simulator)")
		start       = flag.Int64("start-block", -1, "first block to read when no cursor is stored; -1 starts at the confirmed head")
		window      = flag.Int("window", 200, "recent blocks kept for fork detection")
		batch       = flag.Int("batch-blocks", 500, "most blocks committed per transaction")
	)
	flag.Parse()

	cfg, err := config.Load()
	if err != nil {
		return err
	}
	token := cfg.Network.USDTContract()
	if *usdt != "" {
		token = *usdt
	}
	tokenAddr, err := tron.ParseAddress(token)
	if err != nil {
		return fmt.Errorf("usdt contract %q: %w", token, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	pool, err := pg.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	follower, err := chainwatch.New(chainwatch.Options{
		Pool:          pool,
		Source:        chainwatch.NewNodeSource(tron.NewClient(cfg.TronNodeURL), 4),
		Outbox:        outbox.InsertRecord,
		Network:       cfg.Network,
		Tokens:        []tron.Address{tokenAddr},
		Confirmations: cfg.Confirmations,
		PollEvery:     cfg.ChainPollEvery,
		Start:         *start,
		BatchBlocks:   *batch,
		Window:        *window,
		Logger:        log,
		Registerer:    reg,
	})
	if err != nil {
		return err
	}

	if *metricsAddr != "" {
		srv := &http.Server{Addr: *metricsAddr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server", "stage", "chainwatch", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}

	return follower.Run(ctx) // logs the one "chainwatch started" line
}
