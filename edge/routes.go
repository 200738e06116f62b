package edge

import (
	"context"
	"fmt"
	"maps"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"rental/schemas/apierr"
	"rental/schemas/scopes"
)

// HandlerFunc serves one endpoint. ctx is bounded by Options.RequestTimeout and survives
// the start of a graceful shutdown (use it for database and node calls, not rc). Write the
// success response with WriteJSON or NoContent and return nil, or return an error and let
// errors.go answer it: an *apierr.Error for a catalogue answer, anything else for 9000.
type HandlerFunc func(ctx context.Context, rc *fasthttp.RequestCtx) error

// Endpoint is one method and path template of the contract, with who may call it.
type Endpoint struct {
	Method string
	Path   string // fasthttp/router template; {name} is one path segment

	// Auth is the set of credentials accepted: the spec's Auth column.
	Auth Accepts
	// Scope is the key scope required (schemas/scopes). Every endpoint that takes keys names
	// one, except public endpoints that also take keys ("P (or K)"): a key there is verified
	// but needs no scope, because the same call works without any credential.
	Scope string
	// Role is the minimum dashboard role for sessions; "" means viewer for GET and editor
	// for other methods.
	Role string
	// Class is the per-credential rate class.
	Class RateClass
	// SignatureInTx: the handler records the request signature (Principal.Signature) in
	// the transaction of its write, so the dispatcher does not record it before.
	SignatureInTx bool
	// WhileSuspended lets an unsafe method through on a suspended or closed account:
	// revoking a key and signing out must work when the account is frozen.
	WhileSuspended bool
}

func (e Endpoint) key() string { return e.Method + " " + e.Path }

// RateClass names the per-credential budget a call is charged to (docs/auth.md).
type RateClass string

const (
	ClassOrder      RateClass = "order"      // order creation and order mutations: 30/s per key
	ClassRead       RateClass = "read"       // reads and pure computations: 50/s per key
	ClassManagement RateClass = "management" // account, keys, webhooks, subscriptions, session: 5/s
	ClassPublic     RateClass = "public"     // only the per-IP budget applies
)

// Endpoints is every endpoint of rental-api-v1 this edge routes. An endpoint without a
// handler in Server.handlers answers 501 9002 not_implemented, never a bare 404, so a
// client can tell "not built yet" from "does not exist". The table is checked against the
// spec by routes_test.go; auth_test.go checks that every endpoint taking keys names a scope
// of schemas/scopes and that every scope is used.
//
// Choices where the spec is open (docs/errors.md and docs/auth.md list them):
//   - API keys: the spec names only POST /v1/api-keys and "other key management calls";
//     this edge routes GET /v1/api-keys (list), PATCH /v1/api-keys/{id} (update) and
//     DELETE /v1/api-keys/{id} (revoke).
//   - The node proxy endpoint is "not shown" in the spec, so it has no route.
//   - Orders and batches name no Auth in the spec: keys, and for the dashboard (docs/auth.md,
//     "Dashboard sessions on account and order routes") a session may also read the
//     account, balance, deposit addresses and orders (viewer) and place and reclaim orders
//     (editor, with CSRF). Batches stay keys only.
var Endpoints = []Endpoint{
	// Signup.
	{Method: "POST", Path: "/v1/accounts/challenge", Auth: P, Class: ClassPublic},
	{Method: "POST", Path: "/v1/accounts/challenge/verify", Auth: P, Class: ClassPublic},
	{Method: "POST", Path: "/v1/accounts", Auth: B | P, Class: ClassManagement},
	{Method: "GET", Path: "/v1/accounts/deposit-address", Auth: B, Class: ClassManagement},

	// Account and session.
	{Method: "GET", Path: "/v1/account", Auth: K | B | S, Scope: scopes.AccountRead, Class: ClassManagement},
	{Method: "PATCH", Path: "/v1/account", Auth: S, Scope: scopes.AccountWrite, Role: RoleOwner, Class: ClassManagement},
	{Method: "GET", Path: "/v1/balance", Auth: K | S, Scope: scopes.AccountRead, Class: ClassRead},
	{Method: "GET", Path: "/v1/deposit-addresses", Auth: K | S, Scope: scopes.DepositsRead, Class: ClassRead},
	{Method: "POST", Path: "/v1/session", Auth: P, Class: ClassPublic},
	{Method: "GET", Path: "/v1/session", Auth: S, Class: ClassManagement},
	{Method: "DELETE", Path: "/v1/session", Auth: S, Role: RoleViewer, Class: ClassManagement, WhileSuspended: true},
	{Method: "POST", Path: "/v1/session/refresh", Auth: S, Role: RoleViewer, Class: ClassManagement, WhileSuspended: true},
	{Method: "POST", Path: "/v1/session/revoke-all", Auth: S, Role: RoleViewer, Class: ClassManagement, WhileSuspended: true},
	{Method: "GET", Path: "/v1/session/history", Auth: S, Class: ClassManagement},

	// Pricing and chain.
	{Method: "GET", Path: "/v1/prices", Auth: P | K, Class: ClassRead},
	{Method: "GET", Path: "/v1/market", Auth: P | K, Class: ClassRead},
	{Method: "GET", Path: "/v1/market/history", Auth: P | K, Class: ClassRead},
	{Method: "GET", Path: "/v1/orderbook", Auth: P, Class: ClassPublic},
	{Method: "GET", Path: "/v1/estimate", Auth: P | K, Class: ClassRead},
	{Method: "POST", Path: "/v1/estimate/transfer", Auth: K, Scope: scopes.EstimatesRead, Class: ClassRead},
	{Method: "POST", Path: "/v1/quotes", Auth: K, Scope: scopes.QuotesWrite, Class: ClassRead},
	{Method: "GET", Path: "/v1/quotes/{quoteId}", Auth: K, Scope: scopes.QuotesRead, Class: ClassRead},
	{Method: "GET", Path: "/v1/resources/{address}", Auth: P | K, Class: ClassRead},
	{Method: "GET", Path: "/v1/status", Auth: P, Class: ClassPublic},
	{Method: "GET", Path: "/v1/payments/{txid}", Auth: P | K, Class: ClassRead}, // pay by transfer, docs/pricing.md

	// Subscriptions.
	{Method: "GET", Path: "/v1/subscriptions/plans", Auth: P | K, Class: ClassRead},
	{Method: "GET", Path: "/v1/subscriptions", Auth: K | S, Scope: scopes.SubscriptionsRead, Class: ClassRead},
	{Method: "POST", Path: "/v1/subscriptions", Auth: K | S, Scope: scopes.SubscriptionsWrite, Class: ClassManagement},
	{Method: "GET", Path: "/v1/subscriptions/{subscriptionId}", Auth: K | S, Scope: scopes.SubscriptionsRead, Class: ClassRead},
	{Method: "PATCH", Path: "/v1/subscriptions/{subscriptionId}", Auth: K | S, Scope: scopes.SubscriptionsWrite, Class: ClassManagement},
	{Method: "DELETE", Path: "/v1/subscriptions/{subscriptionId}", Auth: K | S, Scope: scopes.SubscriptionsWrite, Class: ClassManagement},

	// Webhooks.
	{Method: "POST", Path: "/v1/webhooks", Auth: K | S, Scope: scopes.WebhooksWrite, Class: ClassManagement},
	{Method: "GET", Path: "/v1/webhooks", Auth: K | S, Scope: scopes.WebhooksRead, Class: ClassManagement},
	{Method: "PATCH", Path: "/v1/webhooks/{id}", Auth: K | S, Scope: scopes.WebhooksWrite, Class: ClassManagement},
	{Method: "DELETE", Path: "/v1/webhooks/{id}", Auth: K | S, Scope: scopes.WebhooksWrite, Class: ClassManagement},
	{Method: "POST", Path: "/v1/webhooks/{id}/rotate-secret", Auth: K | S, Scope: scopes.WebhooksWrite, Class: ClassManagement},
	{Method: "POST", Path: "/v1/webhooks/{id}/test", Auth: K | S, Scope: scopes.WebhooksWrite, Class: ClassManagement},
	{Method: "GET", Path: "/v1/webhooks/{id}/deliveries", Auth: K | S, Scope: scopes.WebhooksRead, Class: ClassManagement}, // not in the spec: docs/webhooks.md

	// Orders.
	{Method: "POST", Path: "/v1/orders", Auth: K | S, Scope: scopes.OrdersWrite, Class: ClassOrder, SignatureInTx: true},
	{Method: "GET", Path: "/v1/orders", Auth: K | S, Scope: scopes.OrdersRead, Class: ClassRead},
	{Method: "GET", Path: "/v1/orders/{id}", Auth: K | S, Scope: scopes.OrdersRead, Class: ClassRead},
	{Method: "POST", Path: "/v1/orders/{id}/reclaim", Auth: K | S, Scope: scopes.OrdersWrite, Class: ClassOrder},
	{Method: "POST", Path: "/v1/transactions", Auth: K | S, Scope: scopes.OrdersWrite, Class: ClassOrder}, // not in the spec: docs/orders.md "Relayed transactions"

	// Batches.
	{Method: "POST", Path: "/v1/batches", Auth: K, Scope: scopes.BatchesWrite, Class: ClassOrder},
	{Method: "GET", Path: "/v1/batches/{id}", Auth: K, Scope: scopes.BatchesRead, Class: ClassRead},
	{Method: "POST", Path: "/v1/batches/{id}/cancel", Auth: K, Scope: scopes.BatchesWrite, Class: ClassOrder},

	// API keys.
	{Method: "POST", Path: "/v1/api-keys", Auth: K | B | S, Scope: scopes.APIKeysWrite, Class: ClassManagement},
	{Method: "GET", Path: "/v1/api-keys", Auth: K | S, Scope: scopes.APIKeysRead, Class: ClassManagement},
	{Method: "PATCH", Path: "/v1/api-keys/{id}", Auth: K | S, Scope: scopes.APIKeysWrite, Class: ClassManagement},
	{Method: "DELETE", Path: "/v1/api-keys/{id}", Auth: K | S, Scope: scopes.APIKeysWrite, Class: ClassManagement, WhileSuspended: true},
}

// handlers maps "METHOD /path" (exactly as in Endpoints) to its implementation. Adding an
// endpoint's implementation is one line here plus the handler in the endpoint group's own
// file (status.go, account.go, apikeys.go, later orders.go, webhooks.go, ...). Modules
// (Options.Modules) add theirs; a key defined twice fails New.
func (s *Server) handlers() map[string]HandlerFunc {
	hs := s.ownHandlers()
	for _, m := range s.opts.Modules {
		maps.Copy(hs, m.Handlers())
	}
	return hs
}

// ownHandlers are the endpoints this package implements.
func (s *Server) ownHandlers() map[string]HandlerFunc {
	hs := map[string]HandlerFunc{
		"GET /v1/status": s.getStatus,
	}
	if s.opts.Accounts != nil {
		hs["GET /v1/account"] = s.getAccount
		hs["POST /v1/api-keys"] = s.createAPIKey
		hs["GET /v1/api-keys"] = s.listAPIKeys
		hs["PATCH /v1/api-keys/{id}"] = s.updateAPIKey
		hs["DELETE /v1/api-keys/{id}"] = s.revokeAPIKey
	}
	return hs
}

// checkModules refuses an endpoint defined twice: by this package and a module, or by
// two modules. Silently letting one win would hide a wiring mistake.
func (s *Server) checkModules() error {
	seen := map[string]bool{}
	for k := range s.ownHandlers() {
		seen[k] = true
	}
	for i, m := range s.opts.Modules {
		for k := range m.Handlers() {
			if seen[k] {
				return fmt.Errorf("edge: handler for %q defined twice (module %d)", k, i)
			}
			seen[k] = true
		}
	}
	return nil
}

// notImplemented answers an endpoint of the contract this deployment does not serve yet.
func notImplemented(context.Context, *fasthttp.RequestCtx) error {
	return apierr.NotImplemented.New("this endpoint is part of the API but not implemented on this deployment yet")
}

// buildRouter registers every endpoint. A handler keyed by something not in Endpoints is a
// typo that would silently leave the real endpoint unimplemented, so it fails New.
func (s *Server) buildRouter() error {
	if err := s.checkModules(); err != nil {
		return err
	}
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
	s.routeOpenAPI(r) // GET /openapi.yaml and /openapi.json (openapi.go)

	for _, e := range Endpoints {
		if known[e.key()] {
			return fmt.Errorf("edge: endpoint %s listed twice", e.key())
		}
		known[e.key()] = true
		h, ok := hs[e.key()]
		if !ok {
			h = notImplemented
		}
		r.Handle(e.Method, e.Path, s.adapt(e, h))
		if e.Method == "GET" {
			// HEAD is GET without the body (fasthttp drops it), with the same checks.
			r.Handle("HEAD", e.Path, s.adapt(e, h))
		}
	}
	s.mountDashboard(r)
	for k := range hs {
		if !known[k] {
			return fmt.Errorf("edge: handler for %q has no entry in Endpoints", k)
		}
	}
	s.router = r
	return nil
}

// adapt turns a HandlerFunc into a fasthttp handler: it gives it a context, runs the
// endpoint's authentication, authorisation and per-credential limits (auth.go,
// ratelimit.go), and sends any returned error through the one error mapping.
func (s *Server) adapt(e Endpoint, h HandlerFunc) fasthttp.RequestHandler {
	return func(rc *fasthttp.RequestCtx) {
		ctx, cancel := s.requestContext()
		defer cancel()
		err := s.dispatch(ctx, rc, e, h)
		if err == nil {
			s.storeState.Observe(nil) // logs the end of an outage once
		}
		if err != nil {
			rc.Response.ResetBody()
			s.writeError(rc, err)
		}
	}
}

// dispatch is the per-endpoint pipeline: authenticate, authorise, charge the credential's
// budget, run the handler.
func (s *Server) dispatch(ctx context.Context, rc *fasthttp.RequestCtx, e Endpoint, h HandlerFunc) error {
	if s.authOff {
		return h(ctx, rc)
	}
	p, err := s.authenticate(ctx, rc, e)
	if err != nil {
		return err
	}
	if err := authorize(rc, e, p); err != nil {
		// A replayed signature is 1009 whatever else is wrong with the request.
		if p != nil && p.replay != nil {
			if rerr := p.replay.check(ctx); rerr != nil {
				return rerr
			}
		}
		return err
	}
	if p != nil {
		rc.SetUserValue(principalKey, p)
		if err := s.chargeCredential(ctx, rc, e, p); err != nil {
			return err
		}
		if p.replay != nil && !e.SignatureInTx {
			if err := p.replay.record(ctx); err != nil {
				return err
			}
		}
	}
	return h(ctx, rc)
}
