package edge

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"rental/infra/sessions"
	"rental/infra/tron"
)

// signedIn is a dashboard sign-in: the cookie value and the session body.
type signedIn struct {
	cookie string
	body   map[string]any
	raw    response
}

func (s signedIn) header(csrf bool) []string {
	h := []string{"Cookie", SessionCookie + "=" + s.cookie}
	if csrf {
		h = append(h, HeaderCSRF, s.body["csrf_token"].(string))
	}
	return h
}

func (st *signupStack) signIn(t *testing.T, key tron.PrivateKey) signedIn {
	t.Helper()
	r := st.post(t, "/v1/session", st.signed(t, key, "login"))
	if r.status != 201 {
		t.Fatalf("sign in: %d %s", r.status, r.body)
	}
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == SessionCookie {
			return signedIn{cookie: c.Value, body: r.json, raw: r}
		}
	}
	t.Fatalf("no session cookie: %v", r.header)
	return signedIn{}
}

func TestSessionCookieAndLifecycle(t *testing.T) {
	st := newSignupStack(t)
	key := newKey(t)
	s := st.signIn(t, key)

	// The cookie, attribute by attribute.
	set := s.raw.header.Values("Set-Cookie")
	if len(set) != 1 {
		t.Fatalf("Set-Cookie %q", set)
	}
	attrs := map[string]string{}
	parts := strings.Split(set[0], ";")
	name, value, _ := strings.Cut(strings.TrimSpace(parts[0]), "=")
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		attrs[strings.ToLower(k)] = v
	}
	if name != "__Host-session" || len(value) < 43 {
		t.Errorf("cookie %s=%d chars", name, len(value))
	}
	if _, ok := attrs["httponly"]; !ok {
		t.Errorf("not HttpOnly: %s", set[0])
	}
	if _, ok := attrs["secure"]; !ok {
		t.Errorf("not Secure: %s", set[0])
	}
	if attrs["samesite"] != "Lax" || attrs["path"] != "/" || len(attrs) != 4 {
		t.Errorf("attributes %v, want exactly HttpOnly, Secure, SameSite=Lax, Path=/ (no Domain)", attrs)
	}
	if strings.Contains(string(s.raw.body), value) {
		t.Error("the session body carries the cookie value")
	}
	if cc := s.raw.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}

	// The body: the account created for the address, the owner role, a CSRF token.
	b := s.body
	if !strings.HasPrefix(b["account_id"].(string), "acc_") || b["address"] != key.Address().String() ||
		b["role"] != "owner" || len(b["csrf_token"].(string)) < 32 {
		t.Fatalf("session %s", s.raw.body)
	}
	created, _ := time.Parse(time.RFC3339, b["created_at"].(string))
	expires, _ := time.Parse(time.RFC3339, b["expires_at"].(string))
	absolute, _ := time.Parse(time.RFC3339, b["absolute_expires_at"].(string))
	if expires.Sub(created) != sessions.DefaultIdle || absolute.Sub(created) != sessions.DefaultAbsolute {
		t.Errorf("lifetimes %s / %s", expires.Sub(created), absolute.Sub(created))
	}
	var owner string
	st.db.Pool.QueryRow(context.Background(), `SELECT owner_address FROM accounts WHERE id = $1`, b["account_id"]).Scan(&owner)
	if owner != key.Address().String() {
		t.Fatalf("account owner %q", owner)
	}
	// Only the hash of the cookie is stored.
	var n int
	st.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM dashboard_sessions WHERE encode(secret_hash, 'escape') LIKE '%' || $1 || '%'`, value).Scan(&n)
	if n != 0 {
		t.Error("cookie value stored")
	}

	// GET returns the session with the same CSRF token; without the cookie it is 1013.
	r := st.do(t, "GET", "/v1/session", "", "", s.header(false)...)
	if r.status != 200 || r.json["csrf_token"] != b["csrf_token"] || r.json["account_id"] != b["account_id"] {
		t.Fatalf("GET /v1/session: %d %s", r.status, r.body)
	}
	wantError(t, st.do(t, "GET", "/v1/session", "", ""), 401, 1013, "session_expired", nil)
	wantError(t, st.do(t, "GET", "/v1/session", "", "", "Cookie", SessionCookie+"=forged"), 401, 1013, "session_expired", nil)

	// A second sign-in of the same wallet reuses the account.
	s2 := st.signIn(t, key)
	if s2.body["account_id"] != b["account_id"] || s2.body["csrf_token"] == b["csrf_token"] {
		t.Fatalf("second sign-in %v", s2.body)
	}

	// Refresh slides expires_at; it needs the CSRF token like every unsafe method.
	st.clock.Advance(10 * time.Minute)
	wantError(t, st.do(t, "POST", "/v1/session/refresh", "", "", s.header(false)...), 403, 1014, "csrf_token_invalid", nil)
	r = st.do(t, "POST", "/v1/session/refresh", "", "", s.header(true)...)
	if r.status != 200 {
		t.Fatalf("refresh: %d %s", r.status, r.body)
	}
	if got, _ := time.Parse(time.RFC3339, r.json["expires_at"].(string)); got.Sub(expires) != 10*time.Minute {
		t.Errorf("refresh moved expires_at by %s, want 10m", got.Sub(expires))
	}

	// DELETE: 1014 without or with a wrong token; then 204, cookie cleared, session gone,
	// the other session of the wallet untouched.
	wantError(t, st.do(t, "DELETE", "/v1/session", "", "", s.header(false)...), 403, 1014, "csrf_token_invalid", nil)
	wantError(t, st.do(t, "DELETE", "/v1/session", "", "", append(s.header(false), HeaderCSRF, s2.body["csrf_token"].(string))...),
		403, 1014, "csrf_token_invalid", nil)
	r = st.do(t, "DELETE", "/v1/session", "", "", s.header(true)...)
	if r.status != 204 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	cleared := (&http.Response{Header: r.header}).Cookies()
	if len(cleared) != 1 || cleared[0].Name != SessionCookie || cleared[0].Value != "" || !cleared[0].Expires.Before(time.Now()) {
		t.Errorf("cookie not cleared: %v", r.header.Values("Set-Cookie"))
	}
	wantError(t, st.do(t, "GET", "/v1/session", "", "", s.header(false)...), 401, 1013, "session_expired", nil)
	// An ended session is 1013 even with its CSRF token on an unsafe method.
	wantError(t, st.do(t, "DELETE", "/v1/session", "", "", s.header(true)...), 401, 1013, "session_expired", nil)
	if r := st.do(t, "GET", "/v1/session", "", "", s2.header(false)...); r.status != 200 {
		t.Fatalf("the other session died: %d %s", r.status, r.body)
	}

	// Idle expiry: unused for the idle lifetime, the session ends.
	st.clock.Advance(sessions.DefaultIdle)
	wantError(t, st.do(t, "GET", "/v1/session", "", "", s2.header(false)...), 401, 1013, "session_expired", nil)
}

func TestSessionSignInRefusesBadChallenges(t *testing.T) {
	st := newSignupStack(t)
	key := newKey(t)
	want1010(t, st.post(t, "/v1/session", st.signed(t, key, "signup"))) // wrong purpose
	s := st.signed(t, key, "login")
	sig := []byte(s["signature"].(string))
	sig[10] ^= 0x01 // one hex digit of r, still hex
	s["signature"] = string(sig)
	want1010(t, st.post(t, "/v1/session", s))
	if n := st.count(t, "accounts") + st.count(t, "dashboard_sessions"); n != 0 {
		t.Fatalf("refused sign-ins created %d rows", n)
	}
}

func TestSessionRevokeAllAndHistory(t *testing.T) {
	st := newSignupStack(t)
	alice, bob := newKey(t), newKey(t)
	var mine []signedIn
	for range 12 {
		st.clock.Advance(time.Second)
		mine = append(mine, st.signIn(t, alice))
	}
	theirs := st.signIn(t, bob)

	r := st.do(t, "GET", "/v1/session/history", "", "", mine[0].header(false)...)
	if r.status != 200 {
		t.Fatalf("history: %d %s", r.status, r.body)
	}
	data := r.json["data"].([]any)
	if len(data) != 10 {
		t.Fatalf("%d sign-ins listed, want 10", len(data))
	}
	var prev time.Time
	for i, d := range data {
		row := d.(map[string]any)
		at, err := time.Parse(time.RFC3339, row["signed_in_at"].(string))
		if err != nil || row["ip"] != "127.0.0.1" || row["address"] != alice.Address().String() || len(row) != 3 {
			t.Fatalf("row %d: %v", i, row)
		}
		if i > 0 && !at.Before(prev) {
			t.Fatalf("not newest first: %v", data)
		}
		prev = at
	}
	if first := data[0].(map[string]any)["signed_in_at"]; first != mine[11].body["created_at"] {
		t.Errorf("newest sign-in %v, want %v", first, mine[11].body["created_at"])
	}

	wantError(t, st.do(t, "POST", "/v1/session/revoke-all", "", "", mine[3].header(false)...), 403, 1014, "csrf_token_invalid", nil)
	r = st.do(t, "POST", "/v1/session/revoke-all", "", "", mine[3].header(true)...)
	if r.status != 204 {
		t.Fatalf("revoke-all: %d %s", r.status, r.body)
	}
	if c := (&http.Response{Header: r.header}).Cookies(); len(c) != 1 || c[0].Value != "" {
		t.Errorf("cookie not cleared: %v", r.header.Values("Set-Cookie"))
	}
	for i, s := range mine {
		if r := st.do(t, "GET", "/v1/session", "", "", s.header(false)...); r.status != 401 {
			t.Fatalf("session %d survived revoke-all: %d", i, r.status)
		}
	}
	if r := st.do(t, "GET", "/v1/session", "", "", theirs.header(false)...); r.status != 200 {
		t.Fatalf("another wallet's session was revoked: %d", r.status)
	}
	var actor string
	var revoked float64
	err := st.db.Pool.QueryRow(context.Background(), `SELECT actor, (details->>'sessions_revoked')::float8 FROM audit_log
		WHERE account_id = $1 AND action = 'session.revoke_all'`, mine[0].body["account_id"]).Scan(&actor, &revoked)
	if err != nil || actor != "session:"+alice.Address().String() || revoked != 12 {
		t.Fatalf("audit row: %q %v %v", actor, revoked, err)
	}
	// Bob's history does not show Alice's sign-ins.
	r = st.do(t, "GET", "/v1/session/history", "", "", theirs.header(false)...)
	if data := r.json["data"].([]any); len(data) != 1 || data[0].(map[string]any)["address"] != bob.Address().String() {
		t.Fatalf("bob's history: %s", r.body)
	}
}
