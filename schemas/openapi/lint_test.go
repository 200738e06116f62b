package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"rental/infra/testenv"
)

// The linters integrators run on the document (pinned in lint/package.json, installed by
// `npm ci` in lint/; .ci/run does it): Redocly CLI with its recommended rules, and Spectral
// with spectral:oas and the OWASP API security ruleset. lint/exceptions.yaml is the one list
// of rules turned off and findings accepted, each with its reason; the two configurations
// are written from it.
const lintDir = "lint"

type lintException struct {
	Rule  string   `yaml:"rule"`
	Where []string `yaml:"where"`
	// Settings, for Redocly, keeps the rule on with these options instead of turning it off.
	Settings map[string]any `yaml:"settings"`
	Reason   string         `yaml:"reason"`
}

type lintExceptions struct {
	Redocly  []lintException `yaml:"redocly"`
	Spectral []lintException `yaml:"spectral"`
}

func readExceptions(t *testing.T) lintExceptions {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(lintDir, "exceptions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ex lintExceptions
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&ex); err != nil {
		t.Fatalf("lint/exceptions.yaml: %v", err)
	}
	for _, e := range append(slices.Clone(ex.Redocly), ex.Spectral...) {
		if e.Rule == "" || len(strings.Fields(e.Reason)) < 8 {
			t.Errorf("lint/exceptions.yaml: %q needs a rule and a reason of a sentence or more", e.Rule)
		}
	}
	for _, e := range ex.Spectral {
		if len(e.Settings) > 0 {
			t.Errorf("lint/exceptions.yaml: spectral %s: settings are for Redocly rules", e.Rule)
		}
	}
	for _, e := range ex.Redocly {
		if len(e.Where) > 0 {
			t.Errorf("lint/exceptions.yaml: redocly %s: only whole rules can be turned off for Redocly", e.Rule)
		}
	}
	return ex
}

// expandWhere turns the where pointers of an exception into the document's JSON pointers.
func expandWhere(t *testing.T, where []string) []string {
	t.Helper()
	var out []string
	for _, w := range where {
		prefix, ok := strings.CutSuffix(w, "*")
		if !ok {
			out = append(out, w)
			continue
		}
		parent, namePrefix, _ := strings.Cut(strings.TrimPrefix(prefix, "/"), "/schemas/")
		if parent != "components" {
			t.Fatalf("lint/exceptions.yaml: %s: a * pointer must name /components/schemas/<prefix>*", w)
		}
		var names []string
		for name := range load(t).Components.Schemas {
			if strings.HasPrefix(name, namePrefix) {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			t.Fatalf("lint/exceptions.yaml: %s matches no schema", w)
		}
		slices.Sort(names)
		for _, n := range names {
			out = append(out, "/components/schemas/"+n)
		}
	}
	return out
}

const generatedHeader = "# Written from exceptions.yaml by `go test ./schemas/openapi -run TestLinters -update`; do not edit by hand.\n"

func redoclyConfig(ex lintExceptions) string {
	var b strings.Builder
	b.WriteString(generatedHeader + "extends:\n  - recommended\n")
	if len(ex.Redocly) > 0 {
		b.WriteString("rules:\n")
		for _, e := range ex.Redocly {
			if len(e.Settings) == 0 {
				fmt.Fprintf(&b, "  %s: off\n", e.Rule)
				continue
			}
			settings := []string{"severity: error"}
			for _, k := range slices.Sorted(maps.Keys(e.Settings)) {
				settings = append(settings, fmt.Sprintf("%s: %v", k, e.Settings[k]))
			}
			fmt.Fprintf(&b, "  %s: {%s}\n", e.Rule, strings.Join(settings, ", "))
		}
	}
	return b.String()
}

const spectralExtends = `extends: ["spectral:oas", "@stoplight/spectral-owasp-ruleset"]` + "\n"

func spectralConfig(t *testing.T, ex lintExceptions) string {
	t.Helper()
	var whole, parts strings.Builder
	for _, e := range ex.Spectral {
		if len(e.Where) == 0 {
			fmt.Fprintf(&whole, "  %s: off\n", e.Rule)
			continue
		}
		parts.WriteString("  - files:\n")
		for _, p := range expandWhere(t, e.Where) {
			fmt.Fprintf(&parts, "      - \"../openapi.yaml#%s\"\n", p)
		}
		fmt.Fprintf(&parts, "    rules:\n      %s: off\n", e.Rule)
	}
	out := generatedHeader + spectralExtends
	if whole.Len() > 0 {
		out += "rules:\n" + whole.String()
	}
	if parts.Len() > 0 {
		out += "overrides:\n" + parts.String()
	}
	return out
}

type finding struct{ Rule, Where, Message string }

func (f finding) String() string { return f.Rule + " at " + f.Where + ": " + f.Message }

// runRedocly lints the document with a configuration and returns every problem.
func runRedocly(t *testing.T, bin, config string) []finding {
	t.Helper()
	cmd := exec.Command(bin, "lint", "../openapi.yaml", "--config", config, "--format=json", "--max-problems=100000")
	cmd.Dir = lintDir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out struct {
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("redocly lint: %v (%v)\n%s\n%s", err, runErr, stdout.String(), stderr.String())
	}
	var fs []finding
	for _, p := range out.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		fs = append(fs, finding{p.RuleID, where, p.Message})
	}
	return fs
}

// runSpectral lints the document with a ruleset and returns every finding, whatever its
// severity.
func runSpectral(t *testing.T, bin, ruleset string) []finding {
	t.Helper()
	cmd := exec.Command(bin, "lint", "../openapi.yaml", "--ruleset", ruleset, "--format=json", "--quiet", "--fail-severity=error")
	cmd.Dir = lintDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var out []struct {
		Code    string   `json:"code"`
		Message string   `json:"message"`
		Path    []string `json:"path"`
	}
	body := bytes.TrimSpace(stdout.Bytes())
	if len(body) == 0 {
		body = []byte("[]")
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("spectral lint: %v (%v)\n%s\n%s", err, runErr, stdout.String(), stderr.String())
	}
	var fs []finding
	for _, f := range out {
		var p strings.Builder
		for _, s := range f.Path {
			p.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(s))
		}
		fs = append(fs, finding{f.Code, p.String(), f.Message})
	}
	return fs
}

// writeTemp writes a configuration of its own into lint/ (the rulesets it extends resolve
// from there) and removes it when the test ends.
func writeTemp(t *testing.T, pattern, content string) string {
	t.Helper()
	f, err := os.CreateTemp(lintDir, pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return filepath.Base(f.Name())
}

// The document passes Redocly's recommended rules and Spectral's spectral:oas and OWASP
// rulesets with nothing reported, except what lint/exceptions.yaml lists; every exception
// listed is still needed (without it the linter reports that rule there).
func TestLinters(t *testing.T) {
	ex := readExceptions(t)
	configs := map[string]string{"redocly.yaml": redoclyConfig(ex), ".spectral.yaml": spectralConfig(t, ex)}
	for name, want := range configs {
		path := filepath.Join(lintDir, name)
		got, _ := os.ReadFile(path)
		if string(got) == want {
			continue
		}
		if *update {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("lint/%s differs from lint/exceptions.yaml; run go test ./schemas/openapi -run TestLinters -update", name)
	}

	redocly, spectral := testenv.NodeTool(t, "schemas/openapi/lint", "redocly"), testenv.NodeTool(t, "schemas/openapi/lint", "spectral")
	// Four runs at once: each linter with its configuration (the gate), and each without
	// any exception, to see that every exception is still needed.
	var redoclyGate, redoclyAll, spectralGate, spectralAll []finding
	bare := writeTemp(t, ".redocly-bare-*.yaml", "extends:\n  - recommended\n")
	bareSpectral := writeTemp(t, ".spectral-bare-*.yaml", spectralExtends)
	var wg sync.WaitGroup
	wg.Go(func() { redoclyGate = runRedocly(t, redocly, "redocly.yaml") })
	wg.Go(func() { redoclyAll = runRedocly(t, redocly, bare) })
	wg.Go(func() { spectralGate = runSpectral(t, spectral, ".spectral.yaml") })
	wg.Go(func() { spectralAll = runSpectral(t, spectral, bareSpectral) })
	wg.Wait()
	if t.Failed() {
		return
	}

	for _, f := range redoclyGate {
		t.Errorf("redocly: %s", f)
	}
	reported := map[string]bool{}
	for _, f := range redoclyAll {
		reported[f.Rule] = true
	}
	for _, e := range ex.Redocly {
		if !reported[e.Rule] {
			t.Errorf("lint/exceptions.yaml: redocly %s reports nothing any more; remove the exception", e.Rule)
		}
	}

	for _, f := range spectralGate {
		t.Errorf("spectral: %s", f)
	}
	for _, e := range ex.Spectral {
		// Each pointer named, or for a * pointer the parts it stands for together, must
		// still have a finding of the rule.
		groups := [][]string{{""}}
		if len(e.Where) > 0 {
			groups = nil
			for _, w := range e.Where {
				groups = append(groups, expandWhere(t, []string{w}))
			}
		}
		for i, g := range groups {
			if !slices.ContainsFunc(spectralAll, func(f finding) bool {
				return f.Rule == e.Rule && slices.ContainsFunc(g, func(w string) bool { return strings.HasPrefix(f.Where, w) })
			}) {
				where := "the document"
				if len(e.Where) > 0 {
					where = e.Where[i]
				}
				t.Errorf("lint/exceptions.yaml: spectral %s reports nothing at %s any more; narrow or remove the exception", e.Rule, where)
			}
		}
	}
}
