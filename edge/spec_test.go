package edge

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rental/infra/testenv"
	"rental/schemas/apierr"
)

// specText is the spec beside the repository (testenv.SharedSpec: the test is skipped with
// "NOT RUN" where it is absent, and fails in CI).
func specText(t *testing.T) string {
	t.Helper()
	return testenv.SharedSpec(t)
}

var (
	// A table row: | GET | /v1/prices | ...
	specRow = regexp.MustCompile(`(?m)^\|\s*(GET|POST|PUT|PATCH|DELETE)\s*\|\s*(/v1/[^\s|]*)\s*\|`)
	// A method and path in prose or lists: "POST /v1/orders/{id}/reclaim".
	specMention = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE) (/v1/[A-Za-z0-9_{}/.-]*[A-Za-z0-9_}])`)
	pathParam   = regexp.MustCompile(`\{[^}]+\}`)
)

// specEndpoints is every "METHOD /path" the spec names, path parameters written as {}.
func specEndpoints(t *testing.T) []string {
	text := specText(t)
	set := map[string]bool{}
	for _, m := range specRow.FindAllStringSubmatch(text, -1) {
		set[m[1]+" "+pathParam.ReplaceAllString(m[2], "{}")] = true
	}
	for _, m := range specMention.FindAllStringSubmatch(text, -1) {
		set[m[1]+" "+pathParam.ReplaceAllString(m[2], "{}")] = true
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	if len(out) < 40 {
		t.Fatalf("found only %d endpoints in the spec; has its format changed? %v", len(out), out)
	}
	return out
}

// ourAdditions are routed although the spec does not name them; docs/errors.md explains,
// and docs/pricing.md for the look-up of a transfer to a payment address.
var ourAdditions = []string{"GET /v1/api-keys", "PATCH /v1/api-keys/{}", "DELETE /v1/api-keys/{}", "GET /v1/payments/{}"}

// Every endpoint the spec names is routed, and the edge routes nothing else except the
// documented API-key calls.
func TestEndpointTableMatchesSpec(t *testing.T) {
	want := append(specEndpoints(t), ourAdditions...)
	slices.Sort(want)
	var got []string
	for _, e := range Endpoints {
		got = append(got, e.Method+" "+pathParam.ReplaceAllString(e.Path, "{}"))
	}
	slices.Sort(got)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("spec endpoint %s is not in Endpoints", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("Endpoints has %s, which the spec does not name", g)
		}
	}
}

// Every endpoint of the OpenAPI document (which TestEndpointTableMatchesOpenAPI keeps equal
// to Endpoints) answers over HTTP: not the router's 404 or 405, and 501 9002
// not_implemented in the envelope until a handler exists.
func TestEveryDocumentedEndpointIsRouted(t *testing.T) {
	ts := startServer(t)
	implemented := map[string]bool{}
	for k := range ts.srv.handlers() {
		implemented[k] = true
	}
	for path, item := range theContract(t).doc.Paths.Map() {
		for method := range item.Operations() {
			ep := method + " " + path
			concrete := pathParam.ReplaceAllString(path, "x_123")
			body := "{}"
			if method == "GET" {
				body = "" // a GET with a body is refused before routing
			}
			r := ts.do(t, method, concrete, "application/json", body)
			if implemented[ep] {
				if r.status == 404 || r.status == 405 || r.status == 501 {
					t.Errorf("%s is implemented but answered HTTP %d: %s", ep, r.status, r.body)
				}
				continue
			}
			wantError(t, r, 501, 9002, "not_implemented", nil)
		}
	}
}

var specErrorRow = regexp.MustCompile(`(?m)^\|\s*(\d{4})\s*\|\s*([a-z_]+)\s*\|\s*(\d{3})\s*\|[^|]*\|\s*([^|]*?)\s*\|\s*$`)

// The error catalogue in rental/schemas/apierr matches the spec's table row by row.
func TestErrorCatalogueMatchesSpec(t *testing.T) {
	rows := specErrorRow.FindAllStringSubmatch(specText(t), -1)
	if len(rows) < 50 {
		t.Fatalf("found only %d error rows in the spec; has its format changed?", len(rows))
	}
	// docs/errors.md lists the spec rows whose Retryable column says "yes" only for a
	// different request (a fresh challenge, a new quote, a new client_order_id): by the
	// spec's definition of error.retryable (an identical retry may succeed later) they
	// are not retryable, and the catalogue follows the document for exactly those.
	docs, err := os.ReadFile("../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[int][]string{}
	for _, row := range specErrorRow.FindAllStringSubmatch(string(docs), -1) {
		code, _ := strconv.Atoi(row[1])
		documented[code] = row
	}
	inSpec := map[int]bool{}
	for _, row := range rows {
		code, _ := strconv.Atoi(row[1])
		status, _ := strconv.Atoi(row[3])
		retryable := strings.HasPrefix(strings.ToLower(row[4]), "yes")
		if d, ok := documented[code]; ok {
			if !retryable || !strings.Contains(row[4], ",") || strings.HasPrefix(strings.ToLower(d[4]), "yes") {
				t.Errorf("%d: docs/errors.md overrides the spec's retryable %q with %q; only a qualified yes may become no", code, row[4], d[4])
			}
			retryable = false
		}
		inSpec[code] = true
		c, ok := apierr.ByCode(code)
		if !ok {
			t.Errorf("%d %s: missing from apierr", code, row[2])
			continue
		}
		if c.Slug != row[2] || c.Status != status || c.Retryable != retryable {
			t.Errorf("%d: apierr has %s %d retryable=%v, spec says %s %d retryable=%v",
				code, c.Slug, c.Status, c.Retryable, row[2], status, retryable)
		}
	}
	// Codes the spec does not list are this service's additions ("new situations get new
	// codes"); each must be documented in docs/errors.md with the same columns.
	for _, c := range apierr.All() {
		if inSpec[c.Code] {
			continue
		}
		if !slices.Contains(apierr.Additions, c) {
			t.Errorf("apierr has %d %s, which the spec does not list and apierr.Additions does not name", c.Code, c.Slug)
		}
		row, ok := documented[c.Code]
		if !ok {
			t.Errorf("apierr has %d %s, which neither the spec nor docs/errors.md lists", c.Code, c.Slug)
			continue
		}
		status, _ := strconv.Atoi(row[3])
		retryable := strings.HasPrefix(strings.ToLower(row[4]), "yes")
		if c.Slug != row[2] || c.Status != status || c.Retryable != retryable {
			t.Errorf("%d: apierr has %s %d retryable=%v, docs/errors.md says %s %d retryable=%v",
				c.Code, c.Slug, c.Status, c.Retryable, row[2], status, retryable)
		}
	}
	for _, c := range apierr.Additions {
		if inSpec[c.Code] {
			t.Errorf("apierr.Additions names %d, which the spec lists", c.Code)
		}
	}
}
