package edge

// Dashboard sessions (rental-api-v1, Account and session part; docs/signup.md):
//
//	POST   /v1/session              public: signed login challenge -> session + cookie
//	GET    /v1/session              the session (with csrf_token)
//	DELETE /v1/session              sign out this session only
//	POST   /v1/session/refresh      extend the idle deadline
//	POST   /v1/session/revoke-all   sign out every session of this wallet on the account
//	GET    /v1/session/history      last ten sign-ins of this wallet, newest first
//
// and the Session Authenticator (Options.Sessions): the __Host-session cookie, plus
// X-CSRF-Token on POST, PATCH and DELETE.

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/accounts"
	"rental/infra/sessions"
	"rental/infra/signup"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
)

// SessionCookie is the cookie name. The __Host- prefix makes browsers refuse it unless it
// is Secure, has Path=/ and no Domain, so no sibling subdomain can set or overwrite it.
const SessionCookie = "__Host-session"

// HeaderCSRF carries the session's csrf_token on unsafe methods.
const HeaderCSRF = "X-CSRF-Token"

// SessionOptions are the session module's dependencies.
type SessionOptions struct {
	Network    network.Network // required
	Challenges *signup.Service // required: login challenges
	Sessions   *sessions.Store // required
	Accounts   *accounts.Store // required
}

// Session is the module serving /v1/session*. It is also the Session Authenticator
// (Options.Sessions).
type Session struct {
	o SessionOptions
}

// NewSession checks the options.
func NewSession(o SessionOptions) (*Session, error) {
	if o.Challenges == nil || o.Sessions == nil || o.Accounts == nil {
		return nil, errors.New("edge: session: Challenges, Sessions and Accounts are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, fmt.Errorf("edge: session: %w", err)
	}
	return &Session{o: o}, nil
}

// Handlers implements Module.
func (m *Session) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{
		"POST /v1/session":            m.postSession,
		"GET /v1/session":             m.getSession,
		"DELETE /v1/session":          m.deleteSession,
		"POST /v1/session/refresh":    m.refreshSession,
		"POST /v1/session/revoke-all": m.revokeAll,
		"GET /v1/session/history":     m.history,
	}
}

// sessionJSON is the Session record. It never carries the cookie value.
type sessionJSON struct {
	AccountID         string      `json:"account_id"`
	Address           string      `json:"address"`
	Role              string      `json:"role"`
	CSRFToken         string      `json:"csrf_token"`
	CreatedAt         events.Time `json:"created_at"`
	ExpiresAt         events.Time `json:"expires_at"`
	AbsoluteExpiresAt events.Time `json:"absolute_expires_at"`
}

func renderSession(ss sessions.Session) sessionJSON {
	return sessionJSON{
		AccountID: ss.AccountID, Address: ss.Address.String(), Role: ss.Role, CSRFToken: ss.CSRFToken(),
		CreatedAt: events.Time(ss.CreatedAt), ExpiresAt: events.Time(ss.ExpiresAt()),
		AbsoluteExpiresAt: events.Time(ss.AbsoluteExpiresAt),
	}
}

type signInJSON struct {
	SignedInAt events.Time `json:"signed_in_at"`
	IP         string      `json:"ip"`
	Address    string      `json:"address"`
}

// setSessionCookie sets the cookie: HttpOnly (no script reads it), Secure, SameSite=Lax
// (not sent on cross-site subresource requests and POSTs), Path=/, no Domain. No Expires or
// Max-Age: the browser drops it when it closes, and the server ends it earlier at its idle
// or absolute deadline. The value is sent only here, once per session.
func setSessionCookie(rc *fasthttp.RequestCtx, value string, clear bool) {
	c := fasthttp.AcquireCookie()
	defer fasthttp.ReleaseCookie(c)
	c.SetKey(SessionCookie)
	c.SetValue(value)
	c.SetPath("/")
	c.SetSecure(true)
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteLaxMode)
	if clear {
		c.SetExpire(fasthttp.CookieExpireDelete)
	}
	rc.Response.Header.SetCookie(c)
}

func noStore(rc *fasthttp.RequestCtx) { rc.Response.Header.Set("Cache-Control", "no-store") }

// postSession: POST /v1/session {address, nonce, signature} with a challenge of purpose
// login. Creates the unfunded account when the address owns none. The account's owner
// address holds the role owner.
func (m *Session) postSession(ctx context.Context, rc *fasthttp.RequestCtx) error {
	addr, nonce, sig, err := decodeSigned(rc)
	if err != nil {
		return err
	}
	if _, err := m.o.Challenges.Redeem(ctx, addr, nonce, sig, signup.PurposeLogin); err != nil {
		return challengeError(err)
	}
	acct, created, err := m.o.Accounts.CreateOrGetByOwner(ctx, m.o.Network, addr, nil, nil)
	if err != nil {
		return err
	}
	if created {
		if err := m.o.Accounts.WriteAudit(ctx, acct.ID, "session:"+addr.String(), "account.create", nil); err != nil {
			return err
		}
	}
	if acct.Owner != addr {
		// Only owners sign in until members exist; unreachable through CreateOrGetByOwner.
		return errors.New("edge: session: account owner differs from the signed-in address")
	}
	ss, err := m.o.Sessions.Create(ctx, acct.ID, addr, sessions.RoleOwner, ClientIP(rc).String())
	if err != nil {
		return err
	}
	setSessionCookie(rc, ss.Secret, false)
	noStore(rc)
	return WriteJSON(rc, fasthttp.StatusCreated, renderSession(ss))
}

// current is the session the authenticator resolved for this request.
func current(rc *fasthttp.RequestCtx) (*sessions.Session, error) {
	ss, _ := rc.UserValue(sessionKey).(*sessions.Session)
	if ss == nil {
		return nil, apierr.SessionExpired.New("this endpoint needs a dashboard session")
	}
	return ss, nil
}

func (m *Session) getSession(_ context.Context, rc *fasthttp.RequestCtx) error {
	ss, err := current(rc)
	if err != nil {
		return err
	}
	noStore(rc)
	return WriteJSON(rc, fasthttp.StatusOK, renderSession(*ss))
}

func (m *Session) deleteSession(ctx context.Context, rc *fasthttp.RequestCtx) error {
	ss, err := current(rc)
	if err != nil {
		return err
	}
	if err := m.o.Sessions.Revoke(ctx, ss.ID); err != nil {
		return err
	}
	setSessionCookie(rc, "", true)
	NoContent(rc)
	return nil
}

func (m *Session) refreshSession(ctx context.Context, rc *fasthttp.RequestCtx) error {
	ss, err := current(rc)
	if err != nil {
		return err
	}
	fresh, err := m.o.Sessions.Refresh(ctx, ss.Secret)
	if errors.Is(err, sessions.ErrNoSession) {
		return apierr.SessionExpired.New("the session has ended; sign in again")
	}
	if err != nil {
		return err
	}
	noStore(rc)
	return WriteJSON(rc, fasthttp.StatusOK, renderSession(fresh))
}

// revokeAll ends every session of the signed-in wallet on the account, this one included,
// and writes the audit row session.revoke_all in the same transaction.
func (m *Session) revokeAll(ctx context.Context, rc *fasthttp.RequestCtx) error {
	ss, err := current(rc)
	if err != nil {
		return err
	}
	wallet := ss.Address.String()
	err = m.o.Sessions.RevokeAll(ctx, ss.AccountID, ss.Address, func(ctx context.Context, tx pgx.Tx, n int64) error {
		return accounts.WriteAudit(ctx, tx, ss.AccountID, "session:"+wallet, "session.revoke_all",
			map[string]any{"address": wallet, "sessions_revoked": n})
	})
	if err != nil {
		return err
	}
	setSessionCookie(rc, "", true)
	NoContent(rc)
	return nil
}

func (m *Session) history(ctx context.Context, rc *fasthttp.RequestCtx) error {
	ss, err := current(rc)
	if err != nil {
		return err
	}
	rows, err := m.o.Sessions.History(ctx, ss.AccountID, ss.Address)
	if err != nil {
		return err
	}
	out := make([]signInJSON, 0, len(rows))
	for _, r := range rows {
		out = append(out, signInJSON{SignedInAt: events.Time(r.SignedInAt), IP: r.IP, Address: r.Address.String()})
	}
	noStore(rc)
	return WriteJSON(rc, fasthttp.StatusOK, map[string]any{"data": out})
}

// ---- Session Authenticator ----

const sessionKey = "edge.session"

// SessionAuth is the Authenticator of the session cookie (Options.Sessions).
type SessionAuth struct{ m *Session }

// Authenticator returns the module's Authenticator.
func (m *Session) Authenticator() *SessionAuth { return &SessionAuth{m: m} }

// Authenticate implements Authenticator: no cookie is (nil, nil); a cookie of no live
// session is 1013; a live session on POST, PATCH or DELETE without the matching
// X-CSRF-Token (compared in constant time) is 1014. A request refused for CSRF does not
// slide the session forward.
func (a *SessionAuth) Authenticate(ctx context.Context, rc *fasthttp.RequestCtx) (*Principal, error) {
	v := rc.Request.Header.Cookie(SessionCookie)
	if len(v) == 0 {
		return nil, nil
	}
	secret := string(v)
	var ss sessions.Session
	var err error
	csrfOK := !unsafeMethod(rc.Method()) ||
		(sessions.Session{Secret: secret}).CheckCSRF(string(rc.Request.Header.Peek(HeaderCSRF)))
	if csrfOK {
		ss, err = a.m.o.Sessions.Lookup(ctx, secret)
	} else {
		ss, err = a.m.o.Sessions.Get(ctx, secret)
	}
	if errors.Is(err, sessions.ErrNoSession) {
		return nil, apierr.SessionExpired.New("the session cookie is missing, expired or signed out; sign in again")
	}
	if err != nil {
		return nil, err
	}
	if !csrfOK {
		return nil, apierr.CSRFTokenInvalid.New("send the session's csrf_token in the X-CSRF-Token header")
	}
	acct, err := a.m.o.Accounts.GetAccount(ctx, ss.AccountID)
	if err != nil {
		return nil, err
	}
	rc.SetUserValue(sessionKey, &ss)
	return &Principal{
		AccountID: ss.AccountID, SessionID: ss.ID, Wallet: ss.Address.String(), Role: ss.Role,
		AccountStatus: acct.Status,
	}, nil
}
