package webhooks_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rental/infra/testenv"
	"rental/infra/webhooks"
	"rental/schemas/openapi"
	"rental/schemas/topics"
)

// specSection returns the text of the spec beside the repository between two headings
// (testenv.SharedSpec: skipped with "NOT RUN" where it is absent, fails in CI).
func specSection(t *testing.T, from, to string) string {
	t.Helper()
	s := testenv.SharedSpec(t)
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

// The catalogue `events` filters are checked against is exactly the EventType of the
// repository's own contract (schemas/openapi), and every type has a topic the deliverer
// reads.
func TestEventTypesMatchOpenAPI(t *testing.T) {
	b, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas struct {
				EventType struct {
					Enum []string `json:"enum"`
				} `json:"EventType"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	want := doc.Components.Schemas.EventType.Enum
	got := webhooks.EventTypes()
	slices.Sort(want)
	slices.Sort(got)
	if len(want) == 0 || !slices.Equal(want, got) {
		t.Errorf("catalogue %v\nopenapi   %v", got, want)
	}
	for _, typ := range got {
		if _, ok := topics.ForEvent(typ); !ok {
			t.Errorf("%s has no event topic", typ)
		}
	}
}

// The catalogue `events` filters are checked against is exactly the spec's Event types
// table.
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
}
