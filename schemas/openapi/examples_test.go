package openapi

import (
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// Every operation shows how it is called and what it answers: its request body and each
// of its parameters carry an example, each JSON success answer carries one, each webhook's
// delivery carries one, and each catalogue error body (Error<code>) carries one; every
// example passes its schema.
func TestExamplesMatchTheirSchemas(t *testing.T) {
	doc := load(t)
	check := func(where string, s *openapi3.SchemaRef, example any) {
		t.Helper()
		if example == nil {
			t.Errorf("%s has no example", where)
			return
		}
		if err := s.Value.VisitJSON(example, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s: the example does not pass its schema: %v", where, err)
		}
	}
	mediaExample := func(mt *openapi3.MediaType) any {
		if mt.Example != nil {
			return mt.Example
		}
		for _, e := range mt.Examples {
			return e.Value.Value
		}
		return nil
	}
	operations := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			operations++
			name := method + " " + path
			if op.Description == "" {
				t.Errorf("%s has no description", name)
			}
			for _, p := range append(item.Parameters, op.Parameters...) {
				check(name+" parameter "+p.Value.Name, p.Value.Schema, p.Value.Example)
			}
			if rb := op.RequestBody; rb != nil {
				mt := rb.Value.Content.Get("application/json")
				check(name+" request body", mt.Schema, mediaExample(mt))
			}
			answered := false
			for status, r := range op.Responses.Map() {
				if !strings.HasPrefix(status, "2") {
					continue
				}
				answered = true
				if mt := r.Value.Content.Get("application/json"); mt != nil {
					check(name+" "+status+" answer", mt.Schema, mediaExample(mt))
				}
			}
			if !answered {
				t.Errorf("%s has no success answer", name)
			}
		}
	}
	for typ, item := range doc.Webhooks {
		mt := item.Post.RequestBody.Value.Content.Get("application/json")
		check("webhook "+typ, mt.Schema, mediaExample(mt))
	}
	errors := 0
	for n, s := range doc.Components.Schemas {
		if strings.HasPrefix(n, "Error") && n != "ErrorEnvelope" && n != "ErrorMessage" && n != "ErrorField" {
			errors++
			if len(s.Value.Examples) == 0 {
				t.Errorf("%s has no example", n)
				continue
			}
			check(n, s, s.Value.Examples[0])
		}
	}
	if operations < 40 || errors < 40 {
		t.Fatalf("checked %d operations and %d error bodies", operations, errors)
	}
}
