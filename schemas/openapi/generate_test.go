package openapi

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"rental/schemas/apierr"
)

var update = flag.Bool("update", false, "rewrite the generated part of openapi.yaml from schemas/apierr")

const (
	beginMarker = "  # BEGIN GENERATED from schemas/apierr"
	endMarker   = "  # END GENERATED"
)

// errorResponses is components.responses: NoContent and one ErrorNNN per HTTP status of the
// catalogue, whose body is the envelope with one of the catalogue rows of that status
// (code, slug and retryable together).
func errorResponses() string {
	var b strings.Builder
	w := func(ind int, format string, a ...any) {
		b.WriteString(strings.Repeat("  ", ind))
		fmt.Fprintf(&b, format, a...)
		b.WriteString("\n")
	}
	w(1, "# BEGIN GENERATED from schemas/apierr by `go test ./schemas/openapi -run TestErrorResponses -update`; do not edit by hand.")
	w(1, "responses:")
	w(2, "NoContent:")
	w(3, "description: Done; no body.")
	w(3, "headers:")
	for _, h := range []string{"X-Request-Id", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		w(4, "%s: {$ref: '#/components/headers/%s'}", h, h)
	}
	byStatus := map[int][]*apierr.Code{}
	for _, c := range apierr.All() {
		byStatus[c.Status] = append(byStatus[c.Status], c)
	}
	var statuses []int
	for s := range byStatus {
		statuses = append(statuses, s)
	}
	slices.Sort(statuses)
	for _, s := range statuses {
		w(2, "Error%d:", s)
		w(3, "description: |")
		w(4, "HTTP %d with one of these catalogue codes (the operation's x-error-codes says which it can return):", s)
		for _, c := range byStatus[s] {
			retry := ""
			if c.Retryable {
				retry = " Retryable."
			}
			w(4, "- %d %s: %s%s", c.Code, c.Slug, c.Desc, retry)
		}
		w(3, "headers:")
		for _, h := range []string{"X-Request-Id", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"} {
			w(4, "%s: {$ref: '#/components/headers/%s'}", h, h)
		}
		w(3, "content:")
		w(4, "application/json:")
		w(5, "schema:")
		w(6, "allOf:")
		w(7, "- $ref: '#/components/schemas/ErrorEnvelope'")
		w(7, "- type: object")
		w(7, "  properties:")
		w(7, "    error:")
		w(7, "      oneOf:")
		for _, c := range byStatus[s] {
			w(7, "        - {properties: {code: {const: %d}, slug: {const: %s}, retryable: {const: %v}}}", c.Code, c.Slug, c.Retryable)
		}
	}
	w(1, "# END GENERATED")
	return b.String()
}

// generated returns the generated part of doc and where it starts and ends.
func generated(t *testing.T, doc []byte) (part string, start, end int) {
	t.Helper()
	start = bytes.Index(doc, []byte(beginMarker))
	endAt := bytes.Index(doc, []byte(endMarker))
	if start < 0 || endAt < start {
		t.Fatalf("openapi.yaml has no %q ... %q section", beginMarker, endMarker)
	}
	end = endAt + bytes.IndexByte(doc[endAt:], '\n') + 1
	return string(doc[start:end]), start, end
}

// The error responses of the document are exactly the catalogue of schemas/apierr: every
// code, with its slug, status and retryable flag. Run with -update after changing apierr.
func TestErrorResponses(t *testing.T) {
	doc, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	part, start, end := generated(t, doc)
	want := errorResponses()
	if part == want {
		return
	}
	if *update {
		out := append(append(append([]byte{}, doc[:start]...), want...), doc[end:]...)
		if err := os.WriteFile("openapi.yaml", out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("openapi.yaml: generated error responses rewritten")
		return
	}
	t.Errorf("the error responses of openapi.yaml differ from schemas/apierr; run go test ./schemas/openapi -run TestErrorResponses -update")
}
