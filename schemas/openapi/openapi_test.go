package openapi

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"rental/schemas/apierr"
)

func load(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(YAML)
	if err != nil {
		t.Fatalf("openapi.yaml does not load: %v", err)
	}
	return doc
}

// The document is valid OpenAPI 3.1: kin-openapi validates 3.1 documents with JSON Schema
// 2020-12 semantics (type arrays, const, examples), refs resolved.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	doc := load(t)
	if doc.OpenAPIMajorMinor() != "3.1" {
		t.Fatalf("openapi: %q, want 3.1.x", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid OpenAPI 3.1: %v", err)
	}
	if len(doc.Paths.Map()) < 30 {
		t.Fatalf("only %d paths", len(doc.Paths.Map()))
	}
}

// A broken document fails the validation above (the check can fail).
func TestValidationRejectsABrokenDocument(t *testing.T) {
	broken := strings.Replace(string(YAML), "required: [error, request_id]", "required: error", 1)
	doc, err := openapi3.NewLoader().LoadFromData([]byte(broken))
	if err == nil {
		err = doc.Validate(context.Background())
	}
	if err == nil {
		t.Fatal("a schema with required: <string> validated")
	}
}

// ErrorCodes returns an operation's x-error-codes.
func errorCodes(t *testing.T, name string, op *openapi3.Operation) []int {
	t.Helper()
	raw, ok := op.Extensions["x-error-codes"]
	if !ok {
		t.Errorf("%s has no x-error-codes", name)
		return nil
	}
	b, _ := json.Marshal(raw)
	var codes []int
	if err := json.Unmarshal(b, &codes); err != nil {
		t.Errorf("%s: x-error-codes is not a list of integers: %v", name, err)
	}
	return codes
}

// Every operation lists the catalogue codes it can return, each a code of schemas/apierr,
// and its error responses are exactly one <operationId><status> per HTTP status of those
// codes, whose body admits those codes of that status and no other. Every catalogue code
// is returned by some operation, or the document says why none does
// (x-error-codes-without-operation).
func TestOperationsListTheirErrors(t *testing.T) {
	doc := load(t)
	used := map[int]bool{}
	routeless := map[int]bool{}
	if raw, ok := doc.Extensions["x-error-codes-without-operation"].(map[string]any); ok {
		for k := range raw {
			n, err := strconv.Atoi(k)
			if _, known := apierr.ByCode(n); err != nil || !known {
				t.Errorf("x-error-codes-without-operation names %q, not a catalogue code", k)
			}
			routeless[n] = true
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", name)
			}
			want := map[string][]int{}
			for _, code := range errorCodes(t, name, op) {
				c, ok := apierr.ByCode(code)
				if !ok {
					t.Errorf("%s: x-error-codes has %d, not in schemas/apierr", name, code)
					continue
				}
				used[code] = true
				s := strconv.Itoa(c.Status)
				want[s] = append(want[s], code)
			}
			if d := op.Responses.Default(); d == nil || d.Ref != "#/components/responses/TransportError" {
				t.Errorf("%s: the default response is not TransportError", name)
			}
			for status, r := range op.Responses.Map() {
				if status == "default" {
					continue
				}
				n, _ := strconv.Atoi(status)
				if n < 400 || op.OperationID == "getStatus" && n == 503 {
					// GET /v1/status answers 503 with the status body.
					continue
				}
				if ref := "#/components/responses/" + op.OperationID + status; r.Ref != ref {
					t.Errorf("%s: response %s is %q, want %s", name, status, r.Ref, ref)
					continue
				}
				codes, ok := want[status]
				if !ok {
					t.Errorf("%s documents %s but none of its x-error-codes has that status", name, status)
					continue
				}
				if got := bodyCodes(t, r.Value.Content.Get("application/json").Schema); !slices.Equal(got, codes) {
					t.Errorf("%s %s: the body admits codes %v, x-error-codes of that status are %v", name, status, got, codes)
				}
				delete(want, status)
			}
			for status := range want {
				t.Errorf("%s can return a code of HTTP %s but documents no %s response", name, status, status)
			}
		}
	}
	for _, c := range apierr.All() {
		if !used[c.Code] {
			if !routeless[c.Code] {
				t.Errorf("%d %s is returned by no operation of the document", c.Code, c.Slug)
			}
		}
	}
	for code := range routeless {
		if used[code] {
			t.Errorf("%d is in x-error-codes-without-operation but an operation returns it", code)
		}
	}
}

// bodyCodes returns the codes an error body schema admits: the error.code const of each
// Error<code> it is, or is any of (the codes exclude each other), checked against the catalogue row (slug, retryable) and
// with a details schema.
func bodyCodes(t *testing.T, s *openapi3.SchemaRef) []int {
	t.Helper()
	branches := []*openapi3.SchemaRef{s}
	if len(s.Value.AnyOf) > 0 {
		branches = s.Value.AnyOf
	}
	var codes []int
	for _, b := range branches {
		e := b.Value.Properties["error"].Value
		code := int(e.Properties["code"].Value.Const.(float64))
		c, ok := apierr.ByCode(code)
		if !ok || e.Properties["slug"].Value.Const != c.Slug || e.Properties["retryable"].Value.Const != c.Retryable {
			t.Errorf("%s: error.code %d with slug %v and retryable %v is not a catalogue row", b.Ref, code, e.Properties["slug"].Value.Const, e.Properties["retryable"].Value.Const)
		}
		if d := e.Properties["details"]; d == nil || d.Value.Type == nil || !d.Value.Type.Is("object") {
			t.Errorf("%s: no details schema", b.Ref)
		}
		codes = append(codes, code)
	}
	slices.Sort(codes)
	return codes
}

// JSON is the same document as the YAML.
func TestJSON(t *testing.T) {
	b, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Paths.Map()) != len(load(t).Paths.Map()) {
		t.Fatal("the JSON form lost paths")
	}
}
