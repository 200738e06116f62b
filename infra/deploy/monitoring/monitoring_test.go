package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool finds Prometheus's own rule checker (Debian's prometheus package). Without it
// the test skips on a developer machine and fails under CI=true: .ci/run installs it, so
// there it must run.
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("promtool is missing (apt-get install -y prometheus); the rule checks must run in CI")
	}
	t.Skip("NOT RUN: promtool is not installed (apt-get install -y prometheus); CI runs this test")
	return ""
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The rules pass `promtool check rules` and their unit tests (rules_test.yaml) pass
// `promtool test rules`.
func TestRulesPassPromtool(t *testing.T) {
	out := runPromtool(t, "check", "rules", "rules.yaml")
	rf, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rf.Groups {
		n += len(g.Rules)
	}
	if !strings.Contains(out, "SUCCESS") || n == 0 {
		t.Fatalf("promtool check rules: %s (%d rules)", out, n)
	}
	runPromtool(t, "test", "rules", "rules_test.yaml")
}

// A rule that is wrong fails its unit tests: the check above cannot pass vacuously.
func TestABrokenRuleFailsItsUnitTests(t *testing.T) {
	rules, err := os.ReadFile("rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(rules), "rental_outbox_backlog_rows) > 10000", "rental_outbox_backlog_rows) > 30000", 1)
	if broken == string(rules) {
		t.Fatal("the outbox backlog rule is not in rules.yaml")
	}
	tests, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool(t), "test", "rules", filepath.Join(dir, "rules_test.yaml")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "RentalOutboxBacklogHigh") {
		t.Fatalf("a broken threshold passed its unit tests: %v\n%s", err, out)
	}
}

// ruleTests is the part of rules_test.yaml read here.
type ruleTests struct {
	Tests []struct {
		Name           string `json:"name"`
		AlertRuleTests []struct {
			AlertName string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// Every rule carries a severity, a summary and a runbook link to a section of
// docs/operations.md, and has a unit test that makes it fire and one that keeps it quiet.
func TestEveryRuleIsDocumentedAndTestedBothWays(t *testing.T) {
	rf, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	ops, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(ops), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	seen := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if seen[r.Alert] {
				t.Errorf("%s: two rules of that name", r.Alert)
			}
			seen[r.Alert] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", r.Alert)
			}
			link := r.Annotations["runbook_url"]
			doc, anchor, _ := strings.Cut(link, "#")
			if doc != "docs/operations.md" || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q is not a section of docs/operations.md", r.Alert, link)
			}
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: unit tests that fire it: %v, that keep it quiet: %v; want both", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
		}
	}
	for name := range fires {
		if !seen[name] {
			t.Errorf("rules_test.yaml tests %s, which is not a rule", name)
		}
	}
}

// githubAnchor is the fragment GitHub gives a Markdown heading.
func githubAnchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	h = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// The PrometheusRule object for clusters that run the Prometheus operator carries exactly
// the groups of rules.yaml.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	rf, err := Rules()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("operator/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
		Spec       RuleFile          `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(b, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("operator/prometheusrule.yaml is %s %s", pr.APIVersion, pr.Kind)
	}
	if !reflect.DeepEqual(pr.Spec, rf) {
		t.Fatal("operator/prometheusrule.yaml's spec differs from rules.yaml: copy the groups of rules.yaml into it")
	}
}

// Every dashboard query is valid PromQL for Prometheus itself (promtool checks each as a
// recording rule) and names the series it reads.
func TestDashboardQueriesPassPromtool(t *testing.T) {
	ds, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"orders.json", "money.json", "chain.json", "webhooks.json"} {
		if len(ds[want].Panels) == 0 {
			t.Errorf("dashboard %s has no panels", want)
		}
	}
	exprs, err := Expressions()
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var recs []rec
	for _, e := range exprs {
		if sels, err := Selectors(e.Expr); err != nil || len(sels) == 0 {
			t.Errorf("%s: %q: selectors %v, %v", e.Where, e.Expr, sels, err)
		}
		if strings.HasPrefix(e.Where, "dashboards/") {
			recs = append(recs, rec{Record: "dashboard:query", Expr: e.Expr})
		}
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboards", "rules": recs}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "dashboards.rules.yaml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, "check", "rules", f)
}
