// Package metrics serves a stage's Prometheus registry on its own listener, apart from any
// public port.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Route is one more handler served on the operations listener next to /metrics (the
// stages' /healthz and /readyz).
type Route struct {
	Pattern string // http.ServeMux pattern, e.g. "GET /readyz"
	Handler http.Handler
}

// Run serves GET /metrics and the given routes on addr until ctx is cancelled. An empty
// addr disables the listener (Run just waits), so callers need no special case.
func Run(ctx context.Context, addr string, g prometheus.Gatherer, log *slog.Logger, routes ...Route) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	for _, r := range routes {
		mux.Handle(r.Pattern, r.Handler)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("metrics listening on " + ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Register registers c on reg (nil means prometheus.DefaultRegisterer) and returns it, or
// returns the collector already registered with the same description, so that several
// instances of a stage in one process (the dev stack, restarts in tests) share one series.
// Any other registration failure is a programming error and panics.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic("metrics: " + err.Error())
	}
	return c
}

// Sample calls read once right away and then every interval until ctx ends; read sets the
// gauges of a periodic measurement (a query of a queue's depth). A failed read is logged
// and the gauges keep their last values until the next read succeeds. Each read gets at
// most interval to finish, so a slow database never piles reads up.
func Sample(ctx context.Context, interval time.Duration, log *slog.Logger, what string, read func(context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, interval)
		err := read(rctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.Warn("reading "+what+" for metrics failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
