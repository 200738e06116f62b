package main_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"rental/infra/deploy/monitoring"
)

// wantMonitoredSeries reads the stack's /metrics and fails the test for each series
// selector of an alert rule or a dashboard (infra/deploy/monitoring) whose metric the
// stack does not export, or that filters on a label the metric does not carry. Gauges
// sampled periodically (consumer lag, every 10 s) may appear a sample late: it reads
// again for up to 15 s before it fails.
func (s *stack) wantMonitoredSeries() {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		missing := s.monitoredSeriesMissing()
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, m := range missing {
				s.t.Error(m)
			}
			return
		}
		time.Sleep(time.Second)
	}
}

// monitoredSeriesMissing is what wantMonitoredSeries fails on, read once.
func (s *stack) monitoredSeriesMissing() []string {
	s.t.Helper()
	code, body := s.opsGet("/metrics")
	if code != 200 {
		s.t.Fatalf("GET /metrics: %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		s.t.Fatalf("/metrics: %v", err)
	}
	// labels of each series name as a query sees it (a histogram x is x_bucket with le,
	// x_sum and x_count).
	labels := map[string]map[string]bool{}
	add := func(name string, extra ...string) {
		if labels[name] == nil {
			labels[name] = map[string]bool{}
		}
		for _, l := range extra {
			labels[name][l] = true
		}
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName())
			}
			switch {
			case m.GetHistogram() != nil:
				add(name+"_bucket", append(ls, "le")...)
				add(name+"_sum", ls...)
				add(name+"_count", ls...)
			case m.GetSummary() != nil:
				add(name, append(ls, "quantile")...)
				add(name+"_sum", ls...)
				add(name+"_count", ls...)
			default:
				add(name, ls...)
			}
		}
	}
	exprs, err := monitoring.Expressions()
	if err != nil {
		s.t.Fatal(err)
	}
	var missing []string
	for _, e := range exprs {
		sels, err := monitoring.Selectors(e.Expr)
		if err != nil {
			s.t.Fatalf("%s: %v", e.Where, err)
		}
		for _, sel := range sels {
			have, ok := labels[sel.Metric]
			if !ok {
				missing = append(missing, fmt.Sprintf("%s reads %s, which the dev stack's /metrics does not carry", e.Where, sel.Metric))
				continue
			}
			for _, l := range sel.Labels {
				if !have[l] {
					missing = append(missing, fmt.Sprintf("%s filters %s on label %q, which it does not carry (it has %v)",
						e.Where, sel.Metric, l, slices.Sorted(maps.Keys(have))))
				}
			}
		}
	}
	return missing
}
