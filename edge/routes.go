package edge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"rental/schemas/apierr"
)

// HandlerFunc serves one endpoint. ctx is bounded by Options.RequestTimeout and survives
// the start of a graceful shutdown (use it for database and node calls, not rc). Write the
// success response with WriteJSON or NoContent and return nil, or return an error and let
// errors.go answer it: an *apierr.Error for a catalogue answer, anything else for 9000.
type HandlerFunc func(ctx context.Context, rc *fasthttp.RequestCtx) error

// Endpoint is one method and path template of the contract.
type Endpoint struct {
	Method string
	Path   string // fasthttp/router template; {name} is one path segment
}

func (e Endpoint) key() string { return e.Method + " " + e.Path }

// Endpoints is every endpoint of rental-api-v1 this edge routes. An endpoint without a
// handler in Server.handlers answers 501 9002 not_implemented, never a bare 404, so a
// client can tell "not built yet" from "does not exist". The table is checked against the
// spec by routes_test.go.
//
// Choices where the spec is open (docs/errors.md lists them):
//   - API keys: the spec names only POST /v1/api-keys and "other key management calls";
//     this edge routes GET /v1/api-keys (list), PATCH /v1/api-keys/{id} (update) and
//     DELETE /v1/api-keys/{id} (revoke).
//   - The node proxy endpoint is "not shown" in the spec, so it has no route.
var Endpoints = []Endpoint{
	// Signup.
	{"POST", "/v1/accounts/challenge"},
	{"POST", "/v1/accounts/challenge/verify"},
	{"POST", "/v1/accounts"},
	{"GET", "/v1/accounts/deposit-address"},

	// Account and session.
	{"GET", "/v1/account"},
	{"PATCH", "/v1/account"},
	{"GET", "/v1/balance"},
	{"GET", "/v1/deposit-addresses"},
	{"POST", "/v1/session"},
	{"GET", "/v1/session"},
	{"DELETE", "/v1/session"},
	{"POST", "/v1/session/refresh"},
	{"POST", "/v1/session/revoke-all"},
	{"GET", "/v1/session/history"},

	// Pricing and chain.
	{"GET", "/v1/prices"},
	{"GET", "/v1/market"},
	{"GET", "/v1/market/history"},
	{"GET", "/v1/orderbook"},
	{"GET", "/v1/estimate"},
	{"POST", "/v1/estimate/transfer"},
	{"POST", "/v1/quotes"},
	{"GET", "/v1/quotes/{quoteId}"},
	{"GET", "/v1/resources/{address}"},
	{"GET", "/v1/status"},

	// Subscriptions.
	{"GET", "/v1/subscriptions/plans"},
	{"GET", "/v1/subscriptions"},
	{"POST", "/v1/subscriptions"},
	{"GET", "/v1/subscriptions/{subscriptionId}"},
	{"PATCH", "/v1/subscriptions/{subscriptionId}"},
	{"DELETE", "/v1/subscriptions/{subscriptionId}"},

	// Webhooks.
	{"POST", "/v1/webhooks"},
	{"GET", "/v1/webhooks"},
	{"PATCH", "/v1/webhooks/{id}"},
	{"DELETE", "/v1/webhooks/{id}"},
	{"POST", "/v1/webhooks/{id}/rotate-secret"},
	{"POST", "/v1/webhooks/{id}/test"},

	// Orders.
	{"POST", "/v1/orders"},
	{"GET", "/v1/orders"},
	{"GET", "/v1/orders/{id}"},
	{"POST", "/v1/orders/{id}/reclaim"},

	// Batches.
	{"POST", "/v1/batches"},
	{"GET", "/v1/batches/{id}"},
	{"POST", "/v1/batches/{id}/cancel"},

	// API keys.
	{"POST", "/v1/api-keys"},
	{"GET", "/v1/api-keys"},
	{"PATCH", "/v1/api-keys/{id}"},
	{"DELETE", "/v1/api-keys/{id}"},
}

// handlers maps "METHOD /path" (exactly as in Endpoints) to its implementation. Adding an
// endpoint's implementation is one line here plus the handler in the endpoint group's own
// file (status.go, later orders.go, webhooks.go, ...).
func (s *Server) handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{
		"GET /v1/status": s.getStatus,
	}
}

// notImplemented answers an endpoint of the contract this deployment does not serve yet.
func notImplemented(context.Context, *fasthttp.RequestCtx) error {
	return apierr.NotImplemented.New("this endpoint is part of the API but not implemented on this deployment yet")
}

// buildRouter registers every endpoint. A handler keyed by something not in Endpoints is a
// typo that would silently leave the real endpoint unimplemented, so it fails New.
func (s *Server) buildRouter() error {
	hs := s.handlers()
	for k, h := range s.testHandlers {
		hs[k] = h
	}
	known := map[string]bool{}
	r := router.New()
	// An API does not redirect: a 301/308 to a "fixed" path would change the path a
	// client signed. Unknown paths get the envelope instead. OPTIONS is not served (no
	// CORS in v1), so it answers 405 like any other method a path does not take.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.HandleMethodNotAllowed = true
	r.SaveMatchedRoutePath = true // the metrics label
	r.NotFound = s.notFound
	r.MethodNotAllowed = s.methodNotAllowed

	for _, e := range Endpoints {
		if known[e.key()] {
			return fmt.Errorf("edge: endpoint %s listed twice", e.key())
		}
		known[e.key()] = true
		h, ok := hs[e.key()]
		if !ok {
			h = notImplemented
		}
		r.Handle(e.Method, e.Path, s.adapt(h))
		if !slices.Contains(s.methods, e.Method) {
			s.methods = append(s.methods, e.Method)
		}
	}
	for k := range hs {
		if !known[k] {
			return fmt.Errorf("edge: handler for %q has no entry in Endpoints", k)
		}
	}
	slices.Sort(s.methods)
	s.router = r
	return nil
}

// adapt turns a HandlerFunc into a fasthttp handler: it gives it a context and sends any
// returned error through the one error mapping.
func (s *Server) adapt(h HandlerFunc) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		ctx, cancel := s.requestContext()
		defer cancel()
		if err := h(ctx, rc); err != nil {
			rc.Response.ResetBody()
			s.writeError(rc, err)
		}
	}
}

// allowed lists the methods path takes, for the Allow header of a 405.
func (s *Server) allowed(path string) string {
	var out []string
	for _, m := range s.methods {
		if h, _ := s.router.Lookup(m, path, nil); h != nil {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}
