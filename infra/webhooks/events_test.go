package webhooks_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rental/infra/webhooks"
	"rental/schemas/topics"
)

// specSection returns the text of the spec (../shared/spec/rental-api-v1.md next to the
// repository root) between two headings.
func specSection(t *testing.T, from, to string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = filepath.Dir(dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, "..", "shared", "spec", "rental-api-v1.md"))
	if err != nil {
		t.Fatalf("the API spec must be at repository root/../shared/spec: %v", err)
	}
	s := string(b)
	i := strings.Index(s, from)
	if i < 0 {
		t.Fatalf("spec has no %q", from)
	}
	s = s[i:]
	if j := strings.Index(s, to); j > 0 {
		s = s[:j]
	}
	return s
}

// The catalogue `events` filters are checked against is exactly the spec's Event types
// table, and every type has a topic the deliverer reads.
func TestEventTypesMatchSpec(t *testing.T) {
	rows := regexp.MustCompile(`(?m)^\|\s*([a-z_]+\.[a-z_]+)\s*\|`).FindAllStringSubmatch(specSection(t, "### Event types", "### Semantics"), -1)
	var spec []string
	for _, r := range rows {
		spec = append(spec, r[1])
	}
	if len(spec) < 13 {
		t.Fatalf("found only %d event types in the spec: %v", len(spec), spec)
	}
	got := webhooks.EventTypes()
	slices.Sort(spec)
	slices.Sort(got)
	if !slices.Equal(spec, got) {
		t.Errorf("catalogue %v\nspec      %v", got, spec)
	}
	for _, typ := range got {
		if _, ok := topics.ForEvent(typ); !ok {
			t.Errorf("%s has no event topic", typ)
		}
	}
}
