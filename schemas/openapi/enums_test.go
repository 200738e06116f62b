package openapi

import (
	"slices"
	"testing"

	"rental/schemas/autorefill"
	"rental/schemas/scopes"
)

// The closed sets the document states are the code's: the key scopes (schemas/scopes)
// and the plan presets (schemas/autorefill).
func TestEnumsMatchTheCode(t *testing.T) {
	doc := load(t)
	enum := func(name string) []string {
		var out []string
		for _, v := range doc.Components.Schemas[name].Value.Enum {
			out = append(out, v.(string))
		}
		slices.Sort(out)
		return out
	}
	want := scopes.All()
	slices.Sort(want)
	if got := enum("Scope"); !slices.Equal(got, want) {
		t.Errorf("Scope enum %v, schemas/scopes %v", got, want)
	}
	var presets []string
	for _, p := range autorefill.Presets {
		presets = append(presets, p.Slug)
	}
	slices.Sort(presets)
	if got := enum("Preset"); !slices.Equal(got, presets) {
		t.Errorf("Preset enum %v, schemas/autorefill %v", got, presets)
	}
}
