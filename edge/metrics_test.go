package edge

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func counterValue(t *testing.T, ts *testServer, route, method, status string) float64 {
	t.Helper()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rental_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labels(m)["route"] == route && labels(m)["method"] == method && labels(m)["status"] == status {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// errorCount is rental_http_errors_total for route, method and the envelope's code.
func errorCount(t *testing.T, ts *testServer, route, method, code string) float64 {
	t.Helper()
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "rental_http_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if l := labels(m); l["route"] == route && l["method"] == method && l["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func TestAccessMetricsUseRouteTemplates(t *testing.T) {
	ts := startServer(t)
	for _, id := range []string{"o_1", "o_2", "o_3"} {
		ts.do(t, "GET", "/v1/orders/"+id, "", "")
	}
	ts.do(t, "GET", "/v1/random/path/abc", "", "")
	ts.do(t, "BREW", "/v1/status", "", "")

	if v := counterValue(t, ts, "/v1/orders/{id}", "GET", "501"); v != 3 {
		t.Errorf("GET /v1/orders/{id} 501 counted %v, want 3", v)
	}
	if v := counterValue(t, ts, "unmatched", "GET", "404"); v != 1 {
		t.Errorf("unmatched 404 counted %v, want 1", v)
	}
	if v := counterValue(t, ts, "unmatched", "other", "405"); v != 1 {
		t.Errorf("unknown method counted %v, want 1 under method=other", v)
	}
	// Error answers are counted by the envelope's code too: a 404 of an unknown path is
	// 2050 route_not_found, a 405 is 2051 method_not_allowed.
	if v := errorCount(t, ts, "unmatched", "GET", "2050"); v != 1 {
		t.Errorf("2050 counted %v, want 1", v)
	}
	if v := errorCount(t, ts, "unmatched", "other", "2051"); v != 1 {
		t.Errorf("2051 counted %v, want 1", v)
	}
	if v := errorCount(t, ts, "/v1/status", "GET", "2050"); v != 0 {
		t.Errorf("an answered route counted as 2050: %v", v)
	}
	mfs, _ := ts.reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if r := labels(m)["route"]; strings.Contains(r, "o_1") || strings.Contains(r, "abc") {
				t.Errorf("raw path used as a label: %s %v", mf.GetName(), labels(m))
			}
		}
	}
}

func TestMetricsListenerServesPrometheusText(t *testing.T) {
	ts := startServer(t)
	ts.do(t, "GET", "/v1/status", "", "")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeMetrics(ctx, ln, ts.reg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `rental_http_requests_total{method="GET",route="/v1/status",status="200"} 1`) {
		t.Fatalf("HTTP %d:\n%s", resp.StatusCode, b)
	}
	// The API port does not serve metrics.
	if r := ts.do(t, "GET", "/metrics", "", ""); r.status != 404 {
		t.Errorf("API port answered /metrics with %d", r.status)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeMetrics: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("metrics listener did not stop")
	}
}
