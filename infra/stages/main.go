package stages

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"rental/infra/config"
	"rental/infra/metrics"
	"rental/infra/pg"
)

// Process is what a stage binary builds its stage from: the configuration, a Postgres pool,
// the metrics registry served on METRICS_ADDR, a logger, and a context that ends on SIGINT
// or SIGTERM. Defer registers cleanups that run after the stage stopped (a Kafka client, a
// Redis client), in reverse order.
type Process struct {
	Ctx  context.Context
	Cfg  config.Config
	Pool *pgxpool.Pool
	Reg  prometheus.Registerer
	Log  *slog.Logger

	cleanups []func()
}

// Defer runs f when the binary exits.
func (p *Process) Defer(f func()) { p.cleanups = append(p.cleanups, f) }

// Close runs the cleanups registered with Defer, the last registered first.
func (p *Process) Close() {
	for i := len(p.cleanups) - 1; i >= 0; i-- {
		p.cleanups[i]()
	}
	p.cleanups = nil
}

// Main is the whole main of a stage binary: it loads the configuration, connects to
// Postgres (with a message naming the fix when it is down), builds the stage with build,
// runs it next to the metrics listener until a signal, and on any failure logs one line
// with the stage's name and exits 1.
func Main(name string, build func(p *Process) (Runner, error)) {
	log := NewLogger(os.Stderr, os.Getenv("LOG_FORMAT"), os.Getenv("LOG_LEVEL")).With("stage", name)
	if err := run(log, name, build); err != nil {
		log.Error(name+" failed", "err", err)
		os.Exit(1)
	}
}

// PoolConns is the Postgres pool size of the stages whose concurrency differs from pgx's
// default (the larger of 4 and the CPUs), unless DATABASE_URL sets pool_max_conns. The
// order processor's steps serialise on the stake pools' row locks during allocation, so
// its pace stops growing with connections early, while every extra connection takes CPU
// from order creation on a shared machine: 4 is where the processor's pace stops growing
// on the 2-core bench machine (docs/orders.md has the measurements). A replica on a
// machine of its own wants more: set pool_max_conns.
var PoolConns = map[string]int32{"orderflow": 4}

func run(log *slog.Logger, name string, build func(p *Process) (Runner, error)) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	if len(cfg.Unknown) > 0 {
		log.Warn("unknown configuration variables (misspelt?); they are ignored", "vars", cfg.Unknown)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pool, err := WaitFor(ctx, log, "postgres", func(ctx context.Context) (*pgxpool.Pool, error) {
		return pg.ConnectStage(ctx, cfg.DatabaseURL, name, PoolConns[name])
	})
	if err != nil {
		return err
	}
	defer pool.Close()
	reg := metrics.NewRegistry()
	p := &Process{Ctx: ctx, Cfg: cfg, Pool: pool, Reg: reg, Log: log}
	defer p.Close()
	stage, err := build(p)
	if err != nil {
		return err
	}
	ready, err := Readiness(p, name)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return stage.Run(gctx) })
	g.Go(func() error { return metrics.Run(gctx, cfg.MetricsAddr, reg, log, OpsRoutes(ready)...) })
	return g.Wait()
}
