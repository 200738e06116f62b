package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the edge's access metrics. Routes are labelled by template
// ("/v1/orders/{id}"), never by raw path, so series stay bounded.
type metrics struct {
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rental_http_requests_total",
			Help: "API requests answered, by route template, method and HTTP status.",
		}, []string{"route", "method", "status"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rental_http_errors_total",
			Help: "API error answers by route template, method and the error envelope's code (5001, 5050, ...), which the HTTP status alone does not tell apart.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rental_http_request_duration_seconds",
			Help:    "Time to answer an API request, by route template and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rental_http_requests_in_flight",
			Help: "API requests being served now.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.errors, m.duration, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("edge: register metrics: %w", err)
		}
	}
	return m, nil
}

// RunMetrics serves GET /metrics from g on addr until ctx is cancelled. It is a listener
// of its own, never the API port, so scrapes are not exposed to the public and are not
// subject to API limits. An empty addr disables it (returns nil when ctx ends).
func RunMetrics(ctx context.Context, addr string, g prometheus.Gatherer, log *slog.Logger) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	return ServeMetrics(ctx, ln, g, log)
}

// ServeMetrics is RunMetrics on a given listener.
func ServeMetrics(ctx context.Context, ln net.Listener, g prometheus.Gatherer, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("edge metrics listening on " + ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
