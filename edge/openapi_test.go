package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"rental/schemas/apierr"
	"rental/schemas/openapi"
)

// contract is the OpenAPI document (schemas/openapi) and a router over its operations.
type contract struct {
	doc    *openapi3.T
	router routers.Router
}

var loadContract = sync.OnceValues(func() (*contract, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.YAML)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	// Tests serve on 127.0.0.1 and a random port: without servers the router matches paths
	// on any host.
	doc.Servers = nil
	r, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &contract{doc: doc, router: r}, nil
})

func theContract(t testing.TB) *contract {
	t.Helper()
	c, err := loadContract()
	if err != nil {
		t.Fatalf("schemas/openapi: %v", err)
	}
	return c
}

// checkContract validates one answer against the OpenAPI document: status, headers and body
// of the operation the request matched, and that an error's code is one the operation lists
// in x-error-codes. Answers outside the operations are the routing answers (404 and 405,
// 2001, docs/errors.md), transport errors (400 2001) and the document itself. Every answer
// the HTTP-level tests receive through testServer.do passes here, so a handler that drifts
// from the document fails the suite. overridden lists endpoint keys whose handlers a test
// replaced: their bodies are the test's own and only the envelope rules apply.
func checkContract(t testing.TB, method, target string, status int, header http.Header, body []byte, overridden func(key string) bool) error {
	t.Helper()
	return theContract(t).check(method, target, status, header, body, overridden)
}

// check is checkContract for goroutines that must not call t.Fatal.
func (c *contract) check(method, target string, status int, header http.Header, body []byte, overridden func(key string) bool) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	// The dashboard (/ and /assets/) is a page, not part of the API; edge/dashboard_test.go
	// checks its headers.
	if u.Path == "/openapi.yaml" || u.Path == "/openapi.json" || u.Path == "/metrics" || u.Path == "/" || strings.HasPrefix(u.Path, "/assets/") {
		return nil
	}
	if header.Get(HeaderRequestID) == "" {
		return errors.New("no X-Request-Id header")
	}
	req, err := http.NewRequest(method, "http://edge.test"+u.RequestURI(), nil)
	if err != nil {
		return err
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return checkRoutingAnswer(c, method, u.Path, status, body, err)
	}
	if !templateMatches(route.Path, u.Path) {
		// The document's router forgives a trailing slash; the edge does not.
		return checkRoutingAnswer(c, method, u.Path, status, body, errors.New("no exact match"))
	}
	key := method + " " + route.Path
	if overridden != nil && overridden(key) {
		if status >= 400 {
			_, err := envelopeCode(c, body)
			return err
		}
		return nil
	}
	// 413, 414, 415 and 431 come from the transport before the operation runs.
	if status == 413 || status == 414 || status == 415 || status == 431 {
		if ok, err := transportAnswer(c, status, body); ok || err != nil {
			return err
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: status,
		Header: header,
		Body:   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return errorf("%s %s answered %d against the document: %v\nbody: %s", method, u.Path, status, err, clip(body))
	}
	if status >= 400 && status != 503 || status == 503 && route.Operation.OperationID != "getStatus" {
		code, err := envelopeCode(c, body)
		if err != nil {
			return err
		}
		if !slices.Contains(operationCodes(route.Operation), code) {
			return errorf("%s %s answered code %d, which its x-error-codes %v do not list", method, route.Path, code, operationCodes(route.Operation))
		}
	}
	return nil
}

// checkRoutingAnswer checks the answer to a request that matched no operation: only the
// routing and transport answers, 2001 in the envelope.
func checkRoutingAnswer(c *contract, method, path string, status int, body []byte, why error) error {
	if ok, err := transportAnswer(c, status, body); ok || err != nil {
		return err
	}
	return errorf("%s %s is no operation of the document and answered %d (%v)", method, path, status, why)
}

// transportCodes are answered by the HTTP layer before (or instead of) an operation, on any
// path: unknown route, wrong method, oversized body, target or headers, an encoding it does
// not read, and a request it could not read or that carries a body where none is allowed
// (2001). docs/errors.md "HTTP transport answers".
var transportCodes = []int{2001, 2050, 2051, 2052, 2053, 2054, 2055}

// transportAnswer reports whether an answer is one of the transport layer's, with the
// catalogue status of its code.
func transportAnswer(c *contract, status int, body []byte) (bool, error) {
	if status < 400 || status >= 500 {
		return false, nil
	}
	code, err := envelopeCode(c, body)
	if err != nil {
		return false, err
	}
	e, ok := apierr.ByCode(code)
	if !ok || !slices.Contains(transportCodes, code) {
		return false, nil
	}
	if e.Status != status && !(code == 2001 && status == 400) {
		return false, errorf("transport answer %d with code %d, whose catalogue status is %d", status, code, e.Status)
	}
	return true, nil
}

// templateMatches reports whether path is an instance of the path template tmpl, segment
// by segment, exactly ({name} is one non-empty segment).
func templateMatches(tmpl, path string) bool {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if strings.HasPrefix(ts[i], "{") && ps[i] != "" {
			continue
		}
		if ts[i] != ps[i] {
			return false
		}
	}
	return true
}

// operationCodes is an operation's x-error-codes.
func operationCodes(op *openapi3.Operation) []int {
	b, _ := json.Marshal(op.Extensions["x-error-codes"])
	var codes []int
	_ = json.Unmarshal(b, &codes)
	return codes
}

// envelopeCode checks body against the ErrorEnvelope schema and returns its code.
func envelopeCode(c *contract, body []byte) (int, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, errorf("error body is not JSON: %v: %s", err, clip(body))
	}
	s := c.doc.Components.Schemas["ErrorEnvelope"].Value
	if err := s.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		return 0, errorf("error body is not the envelope: %v: %s", err, clip(body))
	}
	var e struct {
		Error struct{ Code int } `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code, nil
}

func errorf(format string, a ...any) error {
	return fmt.Errorf("OpenAPI contract: "+format, a...)
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// Every endpoint of the table is an operation of the OpenAPI document with the same method
// and path template, and the document has no other operation: adding a route without
// documenting it (or the other way round) fails here. The operation's security says who
// may call it as the table does (key with the endpoint's scope, bootstrap token, session
// with its minimum role and, on unsafe methods, the CSRF header, public), and x-rate-class
// names the endpoint's class.
func TestEndpointTableMatchesOpenAPI(t *testing.T) {
	c := theContract(t)
	inDoc := map[string]*openapi3.Operation{}
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			inDoc[method+" "+path] = op
		}
	}
	for _, e := range Endpoints {
		op, ok := inDoc[e.key()]
		if !ok {
			t.Errorf("%s is in Endpoints but not in schemas/openapi/openapi.yaml", e.key())
			continue
		}
		delete(inDoc, e.key())
		if got := op.Extensions["x-rate-class"]; got != string(e.Class) {
			t.Errorf("%s: x-rate-class %v, Endpoints says %s", e.key(), got, e.Class)
		}
		var want []string
		if e.Auth.Has(CredKey) {
			want = append(want, "ApiKey["+e.Scope+"]+ApiSignature[]+ApiTimestamp[]")
		}
		if e.Auth.Has(CredBootstrap) {
			want = append(want, "BootstrapToken[]")
		}
		if e.Auth.Has(CredSession) {
			s := "SessionCookie[" + e.sessionRole() + "]"
			if unsafeMethod([]byte(e.Method)) {
				s = "CsrfToken[]+" + s
			}
			want = append(want, s)
		}
		if e.Auth.Has(CredPublic) {
			want = append(want, "")
		}
		var got []string
		if op.Security != nil {
			for _, req := range *op.Security {
				var parts []string
				for name, sc := range req {
					parts = append(parts, name+"["+strings.Join(sc, ",")+"]")
				}
				slices.Sort(parts)
				got = append(got, strings.Join(parts, "+"))
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: security %q, Endpoints says %q", e.key(), got, want)
		}
	}
	for k := range inDoc {
		t.Errorf("%s is in schemas/openapi/openapi.yaml but not in Endpoints", k)
	}
	// The codes the table implies for each endpoint are in its x-error-codes (and so typed
	// in its error responses, schemas/openapi TestOperationsListTheirErrors).
	for _, e := range Endpoints {
		op := c.doc.Paths.Find(e.Path).GetOperation(e.Method)
		have := operationCodes(op)
		for _, code := range impliedCodes(e, op) {
			if !slices.Contains(have, code) {
				t.Errorf("%s: x-error-codes lacks %d, which its Endpoints row implies", e.key(), code)
			}
		}
	}
}

// impliedCodes are the catalogue codes an endpoint can answer by its row of Endpoints and
// its request alone: the credentials it takes (docs/auth.md), the per-IP budget every call
// is charged, a JSON body, and the answers of any handler.
func impliedCodes(e Endpoint, op *openapi3.Operation) []int {
	codes := []int{apierr.RateLimited.Code, apierr.InternalError.Code, apierr.Timeout.Code, apierr.NotImplemented.Code}
	if e.Auth.Has(CredKey) {
		codes = append(codes, apierr.MissingCredentials.Code, apierr.InvalidSignature.Code, apierr.SignatureTimestampSkew.Code,
			apierr.IPNotAllowed.Code, apierr.KeyRevoked.Code, apierr.KeyInactive.Code, apierr.ReplayedSignature.Code,
			apierr.KeyEnvironmentMismatch.Code)
		if e.Scope != "" {
			codes = append(codes, apierr.InsufficientScope.Code)
		}
	}
	if e.Auth.Has(CredSession) {
		codes = append(codes, apierr.SessionExpired.Code)
		if unsafeMethod([]byte(e.Method)) {
			codes = append(codes, apierr.CSRFTokenInvalid.Code)
		}
	}
	if e.Auth.Has(CredBootstrap) {
		codes = append(codes, apierr.BootstrapTokenExpired.Code)
	}
	if op.RequestBody != nil && op.RequestBody.Value.Required {
		codes = append(codes, apierr.MalformedJSON.Code)
	}
	return codes
}

// The contract check catches a wrong field: a body the document does not allow fails it,
// an error code the operation does not list fails it, a missing X-Request-Id fails it.
func TestContractCheckRejectsWrongAnswers(t *testing.T) {
	h := http.Header{}
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set(HeaderRequestID, "req_0123456789abcdef01234567")
	balance := `{"balance_sun":5,"balance_usdt":0,"reserved_sun":0,"available_sun":5,"as_of":"2026-01-02T03:04:05.000Z"}`
	if err := checkContract(t, "GET", "/v1/balance", 200, h, []byte(balance), nil); err != nil {
		t.Fatalf("a correct body failed: %v", err)
	}
	bad := map[string]struct {
		method, path string
		status       int
		body         string
	}{
		"a money field as a string": {"GET", "/v1/balance", 200, strings.Replace(balance, `"balance_sun":5`, `"balance_sun":"5"`, 1)},
		"a required field missing":  {"GET", "/v1/balance", 200, strings.Replace(balance, `"available_sun":5,`, "", 1)},
		"a timestamp without ms":    {"GET", "/v1/balance", 200, strings.Replace(balance, ".000Z", "Z", 1)},
		"an undocumented status":    {"GET", "/v1/balance", 201, balance},
		"a code the route cannot return": {"GET", "/v1/balance", 404,
			`{"error":{"code":3022,"slug":"object_not_found","message":"x","field":null,"retryable":false},"request_id":"req_0123456789abcdef01234567"}`},
		"a slug of another code": {"GET", "/v1/balance", 401,
			`{"error":{"code":1001,"slug":"invalid_signature","message":"x","field":null,"retryable":false},"request_id":"req_0123456789abcdef01234567"}`},
		"an envelope without field": {"GET", "/v1/balance", 401,
			`{"error":{"code":1001,"slug":"missing_credentials","message":"x","retryable":false},"request_id":"req_0123456789abcdef01234567"}`},
		"an unknown route answering 2000": {"GET", "/v1/nope", 404,
			`{"error":{"code":2000,"slug":"malformed_json","message":"x","field":null,"retryable":false},"request_id":"req_0123456789abcdef01234567"}`},
	}
	for name, c := range bad {
		if err := checkContract(t, c.method, c.path, c.status, h, []byte(c.body), nil); err == nil {
			t.Errorf("%s: passed the contract check", name)
		}
	}
	if err := checkContract(t, "GET", "/v1/balance", 200, http.Header{"Content-Type": {"application/json"}}, []byte(balance), nil); err == nil {
		t.Error("an answer without X-Request-Id passed the contract check")
	}
}

// The edge serves the document publicly, cacheable, as YAML and as JSON.
func TestOpenAPIServed(t *testing.T) {
	ts := startServer(t)
	for path, ct := range map[string]string{"/openapi.yaml": "application/yaml", "/openapi.json": "application/json"} {
		r := ts.do(t, "GET", path, "", "")
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), ct) {
			t.Fatalf("%s: HTTP %d %q", path, r.status, r.header.Get("Content-Type"))
		}
		if r.header.Get("Cache-Control") != openAPICacheControl || r.header.Get("ETag") == "" || r.header.Get(HeaderRequestID) == "" {
			t.Errorf("%s: headers %v", path, r.header)
		}
		doc, err := openapi3.NewLoader().LoadFromData(r.body)
		if err != nil || doc.Paths.Find("/v1/orders") == nil {
			t.Errorf("%s: not the document: %v", path, err)
		}
		again := ts.do(t, "GET", path, "", "", "If-None-Match", r.header.Get("ETag"))
		if again.status != 304 || len(again.body) != 0 {
			t.Errorf("%s with its ETag: HTTP %d, %d bytes", path, again.status, len(again.body))
		}
	}
	if r := ts.do(t, "POST", "/openapi.json", "", ""); r.status != 405 {
		t.Errorf("POST /openapi.json: HTTP %d", r.status)
	}
}
