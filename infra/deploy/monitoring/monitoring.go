// Package monitoring holds the alert rules (rules.yaml, and the same rules as a
// PrometheusRule in operator/) and the Grafana dashboards (dashboards/*.json) of the
// service, as code (docs/operations.md, "Alerts" and "Dashboards"). Its tests check the
// rules with promtool; the dev stack's end-to-end test checks that its /metrics carries
// every series an expression here reads.
package monitoring

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/VictoriaMetrics/metricsql"
	"sigs.k8s.io/yaml"
)

//go:embed rules.yaml dashboards/*.json
var files embed.FS

// RuleFile is a Prometheus rules file (the subset of its fields this service uses; the
// tests decode it strictly, so a field outside the subset fails them).
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is one group of a rules file.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is one alerting rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Rules decodes rules.yaml strictly.
func Rules() (RuleFile, error) {
	var rf RuleFile
	b, err := files.ReadFile("rules.yaml")
	if err != nil {
		return rf, err
	}
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		return rf, fmt.Errorf("rules.yaml: %w", err)
	}
	return rf, nil
}

// Dashboard is the part of a Grafana dashboard this package reads: its panels' queries.
type Dashboard struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// Dashboards returns every dashboard by file name (dashboards/orders.json ...).
func Dashboards() (map[string]Dashboard, error) {
	names, err := fs.Glob(files, "dashboards/*.json")
	if err != nil {
		return nil, err
	}
	out := map[string]Dashboard{}
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		var d Dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out[path.Base(n)] = d
	}
	return out, nil
}

// Expression is one PromQL expression of a rule or a dashboard panel, with where it is.
type Expression struct {
	Where string // "rules.yaml RentalConsumerLagHigh", "dashboards/orders.json: <panel> (A)"
	Expr  string
}

// Expressions are every expression of the rules and the dashboards.
func Expressions() ([]Expression, error) {
	rf, err := Rules()
	if err != nil {
		return nil, err
	}
	var out []Expression
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			out = append(out, Expression{Where: "rules.yaml " + r.Alert, Expr: r.Expr})
		}
	}
	ds, err := Dashboards()
	if err != nil {
		return nil, err
	}
	files := make([]string, 0, len(ds))
	for f := range ds {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		for _, p := range ds[f].Panels {
			for _, t := range p.Targets {
				out = append(out, Expression{Where: fmt.Sprintf("dashboards/%s: %s (%s)", f, p.Title, t.RefID), Expr: t.Expr})
			}
		}
	}
	return out, nil
}

// Selector is one series selector of an expression: the metric name and the names of the
// labels it filters on.
type Selector struct {
	Metric string
	Labels []string
}

// Selectors parses expr and returns its series selectors. A selector without a metric
// name is an error: every expression here names the series it reads.
func Selectors(expr string) ([]Selector, error) {
	e, err := metricsql.Parse(expr)
	if err != nil {
		return nil, err
	}
	var out []Selector
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		me, ok := x.(*metricsql.MetricExpr)
		if !ok || err != nil {
			return
		}
		for _, group := range me.LabelFilterss {
			var s Selector
			for _, lf := range group {
				if lf.Label == "__name__" && !lf.IsRegexp && !lf.IsNegative {
					s.Metric = lf.Value
				} else {
					s.Labels = append(s.Labels, lf.Label)
				}
			}
			if s.Metric == "" {
				err = fmt.Errorf("a selector without a metric name in %q", expr)
				return
			}
			out = append(out, s)
		}
	})
	return out, err
}
