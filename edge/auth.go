package edge

// Authentication and authorisation framework of the edge. CONTRACT FOR AUTHENTICATORS AND
// MODULES (helper packages plug in here; keep this block current):
//
//   - An Authenticator looks at ONE kind of credential. Authenticate returns
//       (nil, nil)         when its credential is absent from the request entirely;
//       (nil, *apierr.Error) when it is present but invalid (expired, unknown, bad CSRF...);
//       (*Principal, nil)  when it is valid.
//     It must not write to rc's response and must not do rate limiting. It may read the
//     request (headers, cookies, body) and rc.RemoteIP; use ClientIP(rc) for the caller's IP.
//     Errors it returns are answered verbatim (1011 for a bad bootstrap token, 1013/1014 for
//     sessions, 1001-1009/1012 for keys).
//   - Options.Keys (X-API-KEY/-TIMESTAMP/-SIGN), Options.Bootstrap (Authorization: Bearer
//     abt_...) and Options.Sessions (the __Host- session cookie; it also enforces
//     X-CSRF-Token on unsafe methods, 1014) are tried in that order on every endpoint that
//     accepts a credential; the first that finds its credential decides. On an endpoint
//     that is public only (Auth == P) no authenticator runs at all. On a public endpoint
//     that also takes keys ("P (or K)") only Keys runs: a key presented there is verified.
//   - Dispatch then enforces, in order: the credential is accepted by the endpoint (a
//     bootstrap token elsewhere is 1011; otherwise the "missing" code of the credential the
//     endpoint needs: 1001 for keys or bootstrap tokens, 1013 for sessions); the key's scope (1005, details.required_scope) or
//     the session's role (1005, details.required_role); a suspended or closed account may
//     only read (1008 on unsafe methods unless the endpoint is WhileSuspended); the rate
//     limit of the credential (1100) and the account quotas (1102); then the handler.
//   - Handlers read the caller with PrincipalFrom(rc); nil means an anonymous call.
//   - A Module contributes handlers: Handlers() maps "METHOD /path" exactly as in
//     Endpoints to a HandlerFunc. Its keys are merged into Server.handlers(); a key that is
//     not in Endpoints, or that two sources both define, fails New.

import (
	"context"
	"net/netip"
	"strings"

	"github.com/valyala/fasthttp"

	"rental/infra/accounts"
	"rental/infra/sigstore"
	"rental/schemas/apierr"
)

// Credential is the kind of credential a request was authenticated with.
type Credential uint8

const (
	CredPublic    Credential = iota // no credential
	CredKey                         // API key signature
	CredBootstrap                   // bootstrap token abt_...
	CredSession                     // dashboard session cookie
)

func (c Credential) String() string {
	switch c {
	case CredKey:
		return "key"
	case CredBootstrap:
		return "bootstrap"
	case CredSession:
		return "session"
	}
	return "public"
}

// Accepts is the set of credentials an endpoint takes: the spec's Auth column.
type Accepts uint8

const (
	P Accepts = 1 << CredPublic    // public: callable without credentials
	K Accepts = 1 << CredKey       // API key signature
	B Accepts = 1 << CredBootstrap // bootstrap token
	S Accepts = 1 << CredSession   // dashboard session (CSRF on unsafe methods)
)

// Has reports whether c is accepted.
func (a Accepts) Has(c Credential) bool { return a&(1<<c) != 0 }

// Dashboard member roles, weakest first.
const (
	RoleViewer = "viewer"
	RoleEditor = "editor"
	RoleOwner  = "owner"
)

func roleRank(r string) int {
	switch r {
	case RoleViewer:
		return 1
	case RoleEditor:
		return 2
	case RoleOwner:
		return 3
	}
	return 0
}

// Account statuses (the spec's enum) the dispatch cares about.
const (
	StatusUnfunded  = "unfunded"
	StatusActive    = "active"
	StatusSuspended = "suspended"
	StatusClosed    = "closed"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	AccountID string     // "" for a bootstrap token of an address without an account yet
	Via       Credential // never CredPublic (anonymous calls have no Principal)
	KeyID     string     // keys: the key id (not secret)
	// Key is the authenticating key as read (scopes, expiry, allowlist; keys only): what
	// it creates or widens must stay within it (accounts.Within).
	Key       *accounts.Key
	Scopes    map[string]bool
	SessionID string // sessions: the session id; a secret, never log it
	Wallet    string // sessions and bootstrap: base58 address of the signed-in wallet
	Role      string // sessions: RoleOwner, RoleEditor or RoleViewer
	// AccountStatus is the account's status when the credential was checked ("" when
	// there is no account yet).
	AccountStatus string
	// replay is a signed request's single-use check, made by the dispatcher.
	replay *pendingReplay
}

// Authenticator checks one kind of credential; see the contract at the top of this file.
type Authenticator interface {
	Authenticate(ctx context.Context, rc *fasthttp.RequestCtx) (*Principal, error)
}

// Module contributes endpoint implementations; see the contract at the top of this file.
type Module interface {
	Handlers() map[string]HandlerFunc
}

const principalKey = "edge.principal"

// Signature is the request signature that authenticated p (zero for other credentials),
// for a write that records it in its own transaction (Endpoint.SignatureInTx).
func (p *Principal) Signature() sigstore.Sig {
	if p == nil || p.replay == nil {
		return sigstore.Sig{}
	}
	return p.replay.sig()
}

// PrincipalFrom returns the authenticated caller, or nil for an anonymous call.
func PrincipalFrom(rc *fasthttp.RequestCtx) *Principal {
	p, _ := rc.UserValue(principalKey).(*Principal)
	return p
}

// signedAccount is the principal of a request that acts on its account with a signed
// request: 1001 without one (the dispatcher lets no such call through unsigned; this keeps
// a handler from acting on no account whatever reaches it).
func signedAccount(rc *fasthttp.RequestCtx) (*Principal, error) {
	p := PrincipalFrom(rc)
	if p == nil || p.AccountID == "" {
		return nil, apierr.MissingCredentials.New("this endpoint needs a signed request")
	}
	return p, nil
}

// authenticate runs the authenticators the endpoint calls for and returns the principal
// (nil for an anonymous call the endpoint allows).
func (s *Server) authenticate(ctx context.Context, rc *fasthttp.RequestCtx, e Endpoint) (*Principal, error) {
	if e.Auth == P {
		return nil, nil
	}
	type auth struct {
		a    Authenticator
		cred Credential
	}
	chain := []auth{{s.opts.Keys, CredKey}}
	if e.Auth != P|K {
		chain = append(chain, auth{s.opts.Bootstrap, CredBootstrap})
	}
	// A session cookie is ambient: a browser attaches it to every request, so it is read
	// only where sessions are accepted. A stale cookie must not turn a bootstrap or public
	// call into a failed session call. Key and bootstrap headers are sent on purpose, so they
	// are recognised everywhere and misuse gets its own error (1011, 1013).
	if e.Auth.Has(CredSession) {
		chain = append(chain, auth{s.opts.Sessions, CredSession})
	}
	for _, c := range chain {
		if c.a == nil {
			continue
		}
		p, err := c.a.Authenticate(ctx, rc)
		if err != nil {
			return nil, err
		}
		if p != nil {
			p.Via = c.cred
			return p, nil
		}
	}
	if e.Auth.Has(CredPublic) {
		return nil, nil
	}
	return nil, missingCredential(e)
}

// missingCredential answers a request without the credential the endpoint needs, naming
// the endpoint's primary credential: keys, then sessions, then bootstrap.
func missingCredential(e Endpoint) *apierr.Error {
	switch {
	case e.Auth.Has(CredKey):
		return apierr.MissingCredentials.New("this endpoint needs a signed request: X-API-KEY, X-API-TIMESTAMP and X-API-SIGN")
	case e.Auth.Has(CredSession):
		return apierr.SessionExpired.New("this endpoint needs a dashboard session")
	}
	return apierr.MissingCredentials.New("this endpoint needs Authorization: Bearer abt_... (a bootstrap token)")
}

// authorize enforces what the principal may do on e: credential accepted, scope or role,
// account status. It runs after authentication and before rate limits.
func authorize(rc *fasthttp.RequestCtx, e Endpoint, p *Principal) error {
	if p == nil {
		return nil
	}
	if !e.Auth.Has(p.Via) {
		if p.Via == CredBootstrap {
			return apierr.BootstrapTokenExpired.New("a bootstrap token works only on POST /v1/accounts, GET /v1/accounts/deposit-address, GET /v1/account and POST /v1/api-keys; create an API key")
		}
		return missingCredential(e)
	}
	switch p.Via {
	case CredKey:
		if e.Scope != "" && !p.Scopes[e.Scope] {
			return apierr.InsufficientScope.New("the key lacks scope "+e.Scope).With("required_scope", e.Scope)
		}
	case CredSession:
		if need := e.sessionRole(); roleRank(p.Role) < roleRank(need) {
			return apierr.InsufficientScope.New("this needs the dashboard role "+need+" or above").With("required_role", need)
		}
	}
	if (p.AccountStatus == StatusSuspended || p.AccountStatus == StatusClosed) &&
		unsafeMethod(rc.Method()) && !e.WhileSuspended {
		return apierr.AccountSuspended.New("the account is " + p.AccountStatus + "; only reads are allowed")
	}
	return nil
}

// sessionRole is the minimum dashboard role for e: its Role, else viewer for reads and
// editor for writes.
func (e Endpoint) sessionRole() string {
	if e.Role != "" {
		return e.Role
	}
	if e.Method == "GET" {
		return RoleViewer
	}
	return RoleEditor
}

func unsafeMethod(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "OPTIONS":
		return false
	}
	return true
}

// ClientIP is the caller's IP address. Behind proxies listed in Options.TrustedProxies it
// is the right-most X-Forwarded-For entry that is not itself a trusted proxy; otherwise the
// TCP peer. Authenticators use it for allowlists and the edge for the per-IP budget.
func ClientIP(rc *fasthttp.RequestCtx) netip.Addr {
	if ip, ok := rc.UserValue(clientIPKey).(netip.Addr); ok {
		return ip
	}
	return peerIP(rc)
}

const clientIPKey = "edge.client_ip"

// DefaultIPv6SourceBits is Options.IPv6SourceBits' default: an IPv6 /64 is one source.
const DefaultIPv6SourceBits = 64

const clientSourceKey = "edge.client_source"

// ClientSource names the caller's source for per-source budgets (the per-IP budget, the
// signup challenge limits): its IPv4 address, or the IPv6 network of
// Options.IPv6SourceBits bits holding its address (one subscriber gets a whole /64, so
// budgets per IPv6 address would give it billions). It is "ip4/203.0.113.7" or
// "ip6/2001:db8:1:2::/64".
func ClientSource(rc *fasthttp.RequestCtx) string {
	if s, ok := rc.UserValue(clientSourceKey).(string); ok {
		return s
	}
	return sourceOf(ClientIP(rc), DefaultIPv6SourceBits)
}

// sourceOf is ip's source with IPv6 networks of bits bits.
func sourceOf(ip netip.Addr, bits int) string {
	ip = ip.Unmap()
	if ip.Is4() || !ip.IsValid() {
		return "ip4/" + ip.String()
	}
	p, _ := ip.WithZone("").Prefix(bits)
	return "ip6/" + p.String()
}

func peerIP(rc *fasthttp.RequestCtx) netip.Addr {
	ip, _ := netip.AddrFromSlice(rc.RemoteIP())
	return ip.Unmap()
}

// resolveClientIP computes ClientIP once per request.
func (s *Server) resolveClientIP(rc *fasthttp.RequestCtx) netip.Addr {
	ip := peerIP(rc)
	if len(s.opts.TrustedProxies) > 0 && s.trusted(ip) {
		xff := string(rc.Request.Header.Peek("X-Forwarded-For"))
		parts := strings.Split(xff, ",")
		for i := len(parts) - 1; i >= 0; i-- {
			a, err := netip.ParseAddr(strings.TrimSpace(parts[i]))
			if err != nil {
				break // a malformed hop: stop at the last one we could trust
			}
			ip = a.Unmap()
			if !s.trusted(ip) {
				break
			}
		}
	}
	rc.SetUserValue(clientIPKey, ip)
	rc.SetUserValue(clientSourceKey, sourceOf(ip, s.opts.IPv6SourceBits))
	return ip
}

func (s *Server) trusted(ip netip.Addr) bool {
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
