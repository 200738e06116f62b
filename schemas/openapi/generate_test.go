package openapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"rental/schemas/apierr"
)

var update = flag.Bool("update", false, "rewrite the generated part of openapi.yaml from schemas/apierr")

const (
	beginMarker = "  # BEGIN GENERATED from schemas/apierr"
	endMarker   = "  # END GENERATED"
)

// errorResponses is the generated part of components: NoContent, one response per
// operation and error status (<operationId><status>) whose body is any of the error bodies
// of the codes the operation lists in x-error-codes with that status, and in
// components.schemas one error body per code some operation returns (Error<code>: code,
// slug and retryable fixed, details typed by Details<code>).
func errorResponses(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	w := func(ind int, format string, a ...any) {
		b.WriteString(strings.Repeat("  ", ind))
		fmt.Fprintf(&b, format, a...)
		b.WriteString("\n")
	}
	w(1, "# BEGIN GENERATED from schemas/apierr and x-error-codes by `go test ./schemas/openapi -run TestErrorResponses -update`; do not edit by hand.")
	w(1, "responses:")
	w(2, "NoContent:")
	w(3, "description: Done; no body.")
	w(3, "headers:")
	for _, h := range []string{"X-Request-Id", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		w(4, "%s: {$ref: '#/components/headers/%s'}", h, h)
	}
	w(2, "TransportError:")
	w(3, "description: |")
	w(4, "An answer of the HTTP transport, before or instead of the operation (docs/errors.md")
	w(4, "\"HTTP transport answers\"): 405 2051 method_not_allowed with Allow, 413 2052")
	w(4, "body_too_large, 414 2054 uri_too_long, 415 2053 unsupported_content_encoding, 431 2055")
	w(4, "headers_too_large, and on a GET or HEAD with a body 400 2001 on field `body`.")
	w(3, "headers:")
	w(4, "X-Request-Id: {$ref: '#/components/headers/X-Request-Id'}")
	w(3, "content:")
	w(4, "application/json:")
	w(5, "schema: {$ref: '#/components/schemas/ErrorEnvelope'}")
	used := map[int]bool{}
	for _, op := range operations(t) {
		byStatus := map[int][]*apierr.Code{}
		for _, code := range op.codes {
			c, ok := apierr.ByCode(code)
			if !ok {
				t.Fatalf("%s: x-error-codes has %d, not in schemas/apierr", op.id, code)
			}
			used[code] = true
			byStatus[c.Status] = append(byStatus[c.Status], c)
		}
		for _, s := range slices.Sorted(maps.Keys(byStatus)) {
			codes := byStatus[s]
			w(2, "%s%d:", op.id, s)
			w(3, "description: |")
			w(4, "HTTP %d from %s, with one of these catalogue codes:", s, op.id)
			for _, c := range codes {
				retry := ""
				if c.Retryable {
					retry = " Retryable."
				}
				w(4, "- %d %s: %s%s", c.Code, c.Slug, c.Desc, retry)
			}
			var hs []string
			for _, h := range []string{"X-Request-Id", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"} {
				hs = append(hs, fmt.Sprintf("%s: {$ref: '#/components/headers/%s'}", h, h))
			}
			w(3, "headers: {%s}", strings.Join(hs, ", "))
			w(3, "content:")
			w(4, "application/json:")
			if len(codes) == 1 {
				w(5, "schema: {$ref: '#/components/schemas/Error%d'}", codes[0].Code)
				continue
			}
			w(5, "schema:")
			w(6, "anyOf:")
			for _, c := range codes {
				w(7, "- $ref: '#/components/schemas/Error%d'", c.Code)
			}
		}
	}
	w(1, "schemas:")
	for _, c := range apierr.All() {
		if !used[c.Code] {
			continue
		}
		w(2, "Error%d:", c.Code)
		w(3, "description: '%d %s (HTTP %d): %s'", c.Code, c.Slug, c.Status, strings.ReplaceAll(c.Desc, "'", "''"))
		example, _ := json.Marshal(map[string]any{
			"error":      map[string]any{"code": c.Code, "slug": c.Slug, "message": c.Desc, "field": nil, "retryable": c.Retryable},
			"request_id": "req_0123456789abcdef01234567",
		})
		w(3, "examples: [%s]", example)
		w(3, "type: object")
		w(3, "required: [error, request_id]")
		w(3, "additionalProperties: false")
		w(3, "properties:")
		w(4, "error:")
		w(5, "type: object")
		w(5, "required: [code, slug, message, field, retryable]")
		w(5, "additionalProperties: false")
		w(5, "properties:")
		w(6, "code: {const: %d}", c.Code)
		w(6, "slug: {const: %s}", c.Slug)
		w(6, "message: {$ref: '#/components/schemas/ErrorMessage'}")
		w(6, "field: {$ref: '#/components/schemas/ErrorField'}")
		w(6, "retryable: {type: boolean, const: %v}", c.Retryable)
		w(6, "details: {$ref: '#/components/schemas/Details%d'}", c.Code)
		w(4, "request_id: {$ref: '#/components/schemas/RequestId'}")
		w(2, "Details%d:", c.Code)
		d := errorDetails[c.Code]
		desc := d.desc
		if desc == "" {
			desc = "No details are defined for this code; ignore any keys present."
		}
		w(3, "description: '%s'", strings.ReplaceAll(desc, "'", "''"))
		w(3, "type: object")
		if len(d.props) > 0 {
			w(3, "properties:")
			for _, p := range d.props {
				w(4, "%s", p)
			}
		}
	}
	w(1, "# END GENERATED")
	return b.String()
}

// detailsOf is the details object of one code: the keys the spec and docs/ name for it.
// Keys other than these may appear (clients ignore them).
type detailsOf struct {
	desc  string
	props []string // YAML lines "name: schema"
}

var (
	constraint = "constraint: {type: string, maxLength: 64, description: 'The rule broken (required, enum, range, format, max_length, not_allowed, ...).'}"
	allowed    = "allowed: {description: 'The values accepted (a list, or for 2051 the Allow header value).'}"
)

var errorDetails = map[int]detailsOf{
	1003: {"The server's clock, to correct yours.", []string{"server_time: {$ref: '#/components/schemas/Timestamp'}"}},
	1004: {"The source address the request came from.", []string{"source_ip: {type: string, maxLength: 45}"}},
	1005: {"The scope the key lacks.", []string{"required_scope: {$ref: '#/components/schemas/Scope'}"}},
	1102: {"When the quota resets.", []string{"resets_at: {$ref: '#/components/schemas/Timestamp'}", "window: {type: string, maxLength: 16}"}},
	2001: {"What was wrong with the field named in `field`.", []string{constraint, allowed,
		"min: {description: The smallest value or length accepted.}", "max: {description: The largest value or length accepted.}",
		"max_length: {type: integer, format: int32, minimum: 0, maximum: 2147483647}", "expected: {description: What the field must be.}"}},
	2003: {"The tiers on sale for the resource.", []string{"available_tiers: {type: array, maxItems: 6, items: {$ref: '#/components/schemas/Tier'}}"}},
	2008: {"The range accepted for the amount.", []string{
		"min_amount: {type: integer, format: int64, minimum: 0, maximum: 9223372036854775807}",
		"max_amount: {type: integer, format: int64, minimum: 0, maximum: 9223372036854775807}",
		"limit: {type: string, maxLength: 64, description: The account limit that set max_amount (max_order_energy).}"}},
	2009: {"The batch limit exceeded.", []string{
		"max_receivers: {type: integer, format: int32, minimum: 0, maximum: 2147483647}",
		"receivers: {type: integer, format: int32, minimum: 0, maximum: 2147483647}",
		"max_total_energy: {type: integer, format: int64, minimum: 0, maximum: 9223372036854775807}",
		"total_energy: {type: integer, format: int64, minimum: 0, maximum: 9223372036854775807}",
		"limit: {type: string, maxLength: 64}"}},
	2010: {"Why the URL was refused.", []string{"reason: {type: string, enum: [too_long, malformed, scheme, credentials, port, private_target, non_canonical_ip]}", "allowed_ports: {type: array, items: {type: integer, format: int32, minimum: 1, maximum: 65535}, maxItems: 64}"}},
	3008: {"Who filled the order.", []string{"filled_by: {type: string, maxLength: 64}"}},
	3010: {"The object the key first created.", []string{"original_id: {type: string, maxLength: 64}"}},
	3011: {"The existing subscription.", []string{"subscription_id: {type: string, maxLength: 64}"}},
	3017: {"The key limit and the keys in use.", []string{
		"limit: {type: integer, format: int32, minimum: 0, maximum: 2147483647}",
		"used: {type: integer, format: int32, minimum: 0, maximum: 2147483647}"}},
	3020: {"Each rule of the plan limits the request breaks.", []string{"violations: {type: array, maxItems: 16, items: {description: One violated rule.}}"}},
	4001: {"What the order needs and what is available.", []string{
		"required_sun: {type: integer, format: int64, minimum: 0, maximum: 9223372036854775807}",
		"available_sun: {type: integer, format: int64, minimum: -9223372036854775808, maximum: 9223372036854775807}"}},
	5005: {"How much more the receiver can take.", []string{"max_additional: {type: integer, format: int64, minimum: 0, maximum: 9223372036854775807}"}},
}

// operation is one operation of the document with its x-error-codes.
type operation struct {
	id    string
	codes []int
}

// operations lists the document's operations by operationId.
func operations(t *testing.T) []operation {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]struct {
			OperationID string `yaml:"operationId"`
			Codes       []int  `yaml:"x-error-codes"`
		} `yaml:"paths"`
	}
	raw, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var ops []operation
	for _, item := range doc.Paths {
		for _, op := range item {
			if op.OperationID != "" {
				ops = append(ops, operation{op.OperationID, op.Codes})
			}
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.id, b.id) })
	return ops
}

// generated returns the generated part of doc and where it starts and ends.
func generated(t *testing.T, doc []byte) (part string, start, end int) {
	t.Helper()
	start = bytes.Index(doc, []byte(beginMarker))
	endAt := -1
	if start >= 0 {
		if i := bytes.Index(doc[start:], []byte("\n"+endMarker+"\n")); i >= 0 {
			endAt = start + i + 1
		}
	}
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
	want := errorResponses(t)
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
