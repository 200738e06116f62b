package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/accounts"
	"rental/infra/reqsign"
	"rental/schemas/events"
	"rental/schemas/scopes"
)

func (env *authEnv) activeKeys(t *testing.T) int {
	t.Helper()
	var n int
	if err := env.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL`, env.acct.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateAPIKey(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	admin := env.key(t, scopes.APIKeysWrite, scopes.APIKeysRead, scopes.OrdersRead, scopes.OrdersWrite)
	body := `{"scopes":["orders.read","orders.write"],"label":"bot 1","expires_at":"2099-01-01T00:00:00.000Z","ip_allowlist":["203.0.113.0/24","2001:db8::1"]}`
	r := env.signed(t, admin, "POST", "/v1/api-keys", body)
	if r.status != 201 {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	id, _ := r.json["id"].(string)
	secret, _ := r.json["secret"].(string)
	if !strings.HasPrefix(id, "ak_test_") || !strings.HasPrefix(secret, "sk_test_") || len(secret) < 40 {
		t.Fatalf("id %q secret %q", id, secret)
	}
	if fmt.Sprint(r.json["scopes"]) != "[orders.read orders.write]" || r.json["label"] != "bot 1" ||
		r.json["expires_at"] != "2099-01-01T00:00:00.000Z" || fmt.Sprint(r.json["ip_allowlist"]) != "[203.0.113.0/24 2001:db8::1/128]" ||
		r.json["is_active"] != true || r.json["status"] != "active" || r.json["last_used_at"] != nil {
		t.Errorf("record %s", r.body)
	}
	// The list never shows a secret.
	l := env.signed(t, admin, "GET", "/v1/api-keys", "")
	if l.status != 200 || bytes.Contains(l.body, []byte(secret)) || bytes.Contains(l.body, []byte(`"secret"`)) {
		t.Fatalf("list: HTTP %d %s", l.status, l.body)
	}
	if n := len(l.json["data"].([]any)); n != 2 {
		t.Errorf("list has %d keys, want 2", n)
	}

	// The secret is stored encrypted: no plaintext in the row, and it opens with the master key.
	var enc []byte
	if err := env.db.Pool.QueryRow(context.Background(), `SELECT secret_enc FROM api_keys WHERE id = $1`, id).Scan(&enc); err != nil {
		t.Fatal(err)
	}
	random := strings.TrimPrefix(secret, "sk_test_")
	if bytes.Contains(enc, []byte(random)) || bytes.Contains(enc, []byte(random[:12])) {
		t.Fatal("the stored secret contains the plaintext")
	}
	var row string
	_ = env.db.Pool.QueryRow(context.Background(), `SELECT row_to_json(k)::text FROM api_keys k WHERE id = $1`, id).Scan(&row)
	if strings.Contains(row, random) {
		t.Fatal("the key row holds the secret in plaintext")
	}
	sealer, _ := accounts.NewSealer(testMasterKey)
	if pt, err := sealer.Open(id, enc); err != nil || string(pt) != secret {
		t.Fatalf("sealed secret does not open to the issued one: %v", err)
	}

	// The new key works, with exactly its scopes.
	nk := accounts.CreatedKey{Key: accounts.Key{ID: id}, Secret: secret}
	wantError(t, env.signed(t, nk, "GET", "/v1/orders", ""), 401, 1004, "ip_not_allowed", nil)

	// A key cannot mint a key with powers it lacks itself, and nothing is created.
	narrow := env.key(t, scopes.APIKeysWrite, scopes.OrdersRead)
	e := wantError(t, env.signed(t, narrow, "POST", "/v1/api-keys", `{"scopes":["orders.read","webhooks.write"]}`), 403, 1005, "insufficient_scope", "scopes")
	if e["details"].(map[string]any)["required_scope"] != "webhooks.write" {
		t.Errorf("details %v", e["details"])
	}
	if l := env.signed(t, admin, "GET", "/v1/api-keys", ""); len(l.json["data"].([]any)) != 3 {
		t.Errorf("list has %d keys after a refused create, want 3", len(l.json["data"].([]any)))
	}
}

func TestCreateAPIKeyValidation(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	admin := env.key(t, scopes.APIKeysWrite)
	before := env.activeKeys(t)
	for _, c := range []struct{ body, field, constraint string }{
		{`{}`, "scopes", "required"},
		{`{"scopes":null}`, "scopes", "required"},
		{`{"scopes":[]}`, "scopes", "min_items"},
		{`{"scopes":["orders.read","orders.*"]}`, "scopes", "enum"},
		{`{"scopes":["Orders.Read"]}`, "scopes", "enum"},
		{`{"scopes":"orders.read"}`, "scopes", "type"},
		{`{"scopes":["orders.read"],"label":"  "}`, "label", "min_length"},
		{`{"scopes":["orders.read"],"label":"` + strings.Repeat("x", 101) + `"}`, "label", "max_length"},
		{`{"scopes":["orders.read"],"expires_at":"2020-01-01T00:00:00Z"}`, "expires_at", "future"},
		{`{"scopes":["orders.read"],"expires_at":"tomorrow"}`, "expires_at", "format"},
		{`{"scopes":["orders.read"],"ip_allowlist":["10.0.0.0/33"]}`, "ip_allowlist", "format"},
		{`{"scopes":["orders.read"],"ip_allowlist":["10.1.2.3/8"]}`, "ip_allowlist", "format"},
		{`{"scopes":["orders.read"],"ip_allowlist":["example.com"]}`, "ip_allowlist", "format"},
		{`{"scopes":["orders.read"],"preset":"all"}`, "preset", "unknown_field"},
	} {
		r := env.signed(t, admin, "POST", "/v1/api-keys", c.body)
		e := wantError(t, r, 400, 2001, "validation_failed", c.field)
		if d, _ := e["details"].(map[string]any); d["constraint"] != c.constraint {
			t.Errorf("%s: constraint %v, want %s", c.body, d["constraint"], c.constraint)
		}
	}
	if after := env.activeKeys(t); after != before {
		t.Fatalf("refused requests created keys: %d -> %d", before, after)
	}
}

// A bootstrap token may create the first key; a session-less, key-less call may not.
func TestCreateAPIKeyWithBootstrap(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	r := env.ts.do(t, "POST", "/v1/api-keys", "application/json", `{"scopes":["account.read"]}`, "Authorization", "Bearer abt_"+env.acct.ID)
	if r.status != 201 {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	k := accounts.CreatedKey{Key: accounts.Key{ID: r.json["id"].(string)}, Secret: r.json["secret"].(string)}
	if a := env.signed(t, k, "GET", "/v1/account", ""); a.status != 200 {
		t.Fatalf("new key: HTTP %d %s", a.status, a.body)
	}
	wantError(t, env.ts.do(t, "POST", "/v1/api-keys", "application/json", `{"scopes":["account.read"]}`), 401, 1001, "missing_credentials", nil)
	// Audit trail of the creation.
	var actor string
	if err := env.db.Pool.QueryRow(context.Background(),
		`SELECT actor FROM audit_log WHERE account_id = $1 AND action = 'api_key.create' AND details->>'key_id' = $2`,
		env.acct.ID, k.ID).Scan(&actor); err != nil || actor != "bootstrap:Ttest" {
		t.Fatalf("audit row: %q %v", actor, err)
	}
}

// The active-key maximum is 3017 with limit and used, also under concurrent creation.
func TestAPIKeyLimit(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{maxKeys: 4})
	admin := env.key(t, scopes.APIKeysWrite, scopes.OrdersRead, scopes.OrdersWrite) // 1 of 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := env.signed(t, admin, "POST", "/v1/api-keys", fmt.Sprintf(`{"scopes":["orders.read"],"label":"k%d"}`, i))
			mu.Lock()
			defer mu.Unlock()
			switch r.status {
			case 201:
				created++
			case 409:
				e := envelopeOf(t, r)
				d := e["details"].(map[string]any)
				if e["code"] != 3017.0 || d["limit"] != 4.0 || d["used"] != 4.0 {
					t.Errorf("refusal %s", r.body)
				}
				refused++
			default:
				t.Errorf("HTTP %d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	if created != 3 || refused != 5 || env.activeKeys(t) != 4 {
		t.Fatalf("created %d refused %d active %d; want 3, 5, 4", created, refused, env.activeKeys(t))
	}
	// Revoking one frees a place.
	ks, _ := env.store.ListKeys(context.Background(), env.acct.ID)
	if r := env.signed(t, admin, "DELETE", "/v1/api-keys/"+ks[len(ks)-1].ID, ""); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if r := env.signed(t, admin, "POST", "/v1/api-keys", `{"scopes":["orders.read"]}`); r.status != 201 {
		t.Fatalf("after revoke: HTTP %d %s", r.status, r.body)
	}
}

func TestUpdateAndRevokeAPIKey(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	admin := env.key(t, scopes.APIKeysWrite, scopes.APIKeysRead, scopes.OrdersRead, scopes.OrdersWrite, scopes.AccountRead)
	target := env.key(t, scopes.AccountRead)
	path := "/v1/api-keys/" + target.ID

	wantError(t, env.signed(t, admin, "PATCH", path, `{}`), 422, 2002, "empty_patch", nil)
	wantError(t, env.signed(t, admin, "PATCH", path, ``), 422, 2002, "empty_patch", nil)
	wantError(t, env.signed(t, admin, "PATCH", path, `{"scopes":["orders.write"]}`), 400, 2001, "validation_failed", "scopes")

	r := env.signed(t, admin, "PATCH", path, `{"label":"reader","is_active":false,"ip_allowlist":["127.0.0.1"]}`)
	if r.status != 200 || r.json["label"] != "reader" || r.json["is_active"] != false || r.json["status"] != "inactive" ||
		fmt.Sprint(r.json["ip_allowlist"]) != "[127.0.0.1/32]" {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	wantError(t, env.signed(t, target, "GET", "/v1/account", ""), 401, 1007, "key_inactive", nil)
	r = env.signed(t, admin, "PATCH", path, `{"label":null,"is_active":true}`)
	if r.status != 200 || r.json["label"] != nil || r.json["is_active"] != true {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	if a := env.signed(t, target, "GET", "/v1/account", ""); a.status != 200 {
		t.Fatalf("reactivated key: HTTP %d %s", a.status, a.body)
	}

	// Another account's key and an unknown id answer alike: 404 3022 on id.
	other := env.newAccount(t)
	foreign := env.keyFor(t, other.ID, accounts.NewKey{Scopes: []string{scopes.AccountRead}})
	for _, id := range []string{foreign.ID, "ak_test_nope"} {
		wantError(t, env.signed(t, admin, "PATCH", "/v1/api-keys/"+id, `{"label":"x"}`), 404, 3022, "object_not_found", "id")
		wantError(t, env.signed(t, admin, "DELETE", "/v1/api-keys/"+id, ""), 404, 3022, "object_not_found", "id")
	}
	if a := env.signed(t, foreign, "GET", "/v1/account", ""); a.status != 200 {
		t.Fatalf("the foreign key was touched: HTTP %d", a.status)
	}

	if d := env.signed(t, admin, "DELETE", path, ""); d.status != 204 {
		t.Fatalf("revoke: HTTP %d %s", d.status, d.body)
	}
	if d := env.signed(t, admin, "DELETE", path, ""); d.status != 204 {
		t.Fatalf("second revoke: HTTP %d %s", d.status, d.body)
	}
	wantError(t, env.signed(t, target, "GET", "/v1/account", ""), 401, 1006, "key_revoked", nil)
	wantError(t, env.signed(t, admin, "PATCH", path, `{"label":"x"}`), 404, 3022, "object_not_found", "id")
	var revokes int
	_ = env.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'api_key.revoke' AND details->>'key_id' = $1`, target.ID).Scan(&revokes)
	if revokes != 1 {
		t.Errorf("%d revoke audit rows, want 1", revokes)
	}
}

// Idempotency-Key on POST /v1/api-keys.
func TestAPIKeyIdempotency(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	admin := env.key(t, scopes.APIKeysWrite, scopes.OrdersRead, scopes.OrdersWrite, scopes.AccountRead)
	body := `{"scopes":["orders.read"],"label":"idem"}`
	first := env.signed(t, admin, "POST", "/v1/api-keys", body, "Idempotency-Key", "create-key-0001")
	if first.status != 201 || first.json["secret"] == nil {
		t.Fatalf("HTTP %d %s", first.status, first.body)
	}
	again := env.signed(t, admin, "POST", "/v1/api-keys", body, "Idempotency-Key", "create-key-0001")
	if again.status != 200 || again.json["id"] != first.json["id"] || again.json["created_at"] != first.json["created_at"] {
		t.Fatalf("repeat: HTTP %d %s", again.status, again.body)
	}
	if _, has := again.json["secret"]; has {
		t.Fatalf("the secret was returned twice: %s", again.body)
	}
	diff := env.signed(t, admin, "POST", "/v1/api-keys", `{"scopes":["orders.write"]}`, "Idempotency-Key", "create-key-0001")
	e := wantError(t, diff, 409, 3010, "idempotency_conflict", nil)
	if e["details"].(map[string]any)["original_id"] != first.json["id"] {
		t.Errorf("details %v, want original_id %v", e["details"], first.json["id"])
	}
	// Distinct timestamps from one base: the same request signed in the same millisecond is
	// the same signature, a replay.
	base := time.Now().Add(-2 * time.Second)
	for i, bad := range []string{"short", strings.Repeat("a", 129), "has space in it", "semi;colon-key"} {
		r := env.signedAt(t, admin, base.Add(time.Duration(i)*time.Millisecond), "POST", "/v1/api-keys", body, "Idempotency-Key", bad)
		wantError(t, r, 400, 2001, "validation_failed", "Idempotency-Key")
	}
	if n := env.activeKeys(t); n != 2 {
		t.Fatalf("%d keys, want 2 (admin and the one created)", n)
	}

	// Concurrent duplicates create one key; all answers name it.
	var wg sync.WaitGroup
	ids := make([]any, 12)
	base = time.Now().Add(-3 * time.Second)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := base.Add(time.Duration(i) * time.Millisecond)
			r := env.signedNoT(admin, at, "POST", "/v1/api-keys", `{"scopes":["account.read"]}`, "Idempotency-Key", "concurrent:0002")
			if r.status != 201 && r.status != 200 {
				t.Errorf("HTTP %d %s", r.status, r.body)
			}
			if r.contractErr != nil {
				t.Error(r.contractErr)
			}
			var m map[string]any
			_ = json.Unmarshal(r.body, &m)
			ids[i] = m["id"]
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent duplicates answered different keys: %v", ids)
		}
	}
	if n := env.activeKeys(t); n != 3 {
		t.Fatalf("%d keys after concurrent duplicates, want 3", n)
	}
}

// A repeat while the first request still runs gets 3015 with Retry-After; once the first
// is done the repeat gets its stored response.
func TestIdempotencyInProgress(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var srv *Server
	slow := func(ctx context.Context, rc *fasthttp.RequestCtx) error {
		return srv.Idempotent(func(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
			if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
				return TxResult{}, err
			}
			entered <- struct{}{}
			<-release
			return TxResult{Status: 201, Body: map[string]string{"id": "wh_1"}, ObjectID: "wh_1"}, nil
		})(ctx, rc)
	}
	env := newAuthEnv(t, authEnvOptions{idemWait: 200 * time.Millisecond,
		handlers: map[string]HandlerFunc{"POST /v1/webhooks": slow}})
	srv = env.ts.srv
	k := env.key(t, scopes.WebhooksWrite)

	done := make(chan response, 1)
	go func() {
		done <- env.signedNoT(k, time.Now(), "POST", "/v1/webhooks", `{"url":"https://example.com"}`, "Idempotency-Key", "webhook-0001")
	}()
	<-entered
	r := env.signed(t, k, "POST", "/v1/webhooks", `{"url":"https://example.com"}`, "Idempotency-Key", "webhook-0001")
	wantError(t, r, 409, 3015, "request_in_progress", nil)
	if r.header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	close(release)
	if f := <-done; f.status != 201 || f.contractErr != nil {
		t.Fatalf("first: HTTP %d %s %v", f.status, f.body, f.contractErr)
	}
	again := env.signedAt(t, k, time.Now().Add(-time.Millisecond), "POST", "/v1/webhooks", `{"url":"https://example.com"}`, "Idempotency-Key", "webhook-0001")
	if again.status != 200 || again.json["id"] != "wh_1" {
		t.Fatalf("after completion: HTTP %d %s", again.status, again.body)
	}
}

// signedNoT is signed for goroutines that must not call t.Fatal.
func (env *authEnv) signedNoT(k accounts.CreatedKey, at time.Time, method, target, body string, header ...string) response {
	req, _ := http.NewRequest(method, env.ts.url+target, strings.NewReader(body))
	for name, v := range reqsign.Headers(k.ID, k.Secret, at, method, target, []byte(body)) {
		req.Header.Set(name, v)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{status: -1, body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	r := response{status: resp.StatusCode, header: resp.Header, body: b.Bytes()}
	if c, err := loadContract(); err != nil {
		r.contractErr = err
	} else {
		r.contractErr = c.check(method, target, r.status, r.header, r.body, env.ts.overridden)
	}
	return r
}

// A key with api_keys.write never makes a key wider than itself (docs/auth.md "Keys that
// manage keys"): what it creates has a subset of its scopes, an expiry no later and an
// allowlist inside its own; it cannot reactivate, or widen the allowlist of, a key beyond
// itself; narrowing any key stays allowed. Every refusal changes nothing.
func TestKeyCannotMintWiderKey(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	expires := time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Millisecond)
	later := expires.Add(time.Hour).Format(time.RFC3339Nano)
	sc := []string{scopes.APIKeysWrite, scopes.APIKeysRead, scopes.AccountRead}
	parent := env.keyFor(t, env.acct.ID, accounts.NewKey{Scopes: sc, ExpiresAt: &expires,
		IPAllowlist: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	keys := env.activeKeys(t)

	// The review's scenario: the same scopes, no expiry, no allowlist.
	same := `"scopes":["api_keys.write","api_keys.read","account.read"]`
	e := wantError(t, env.signed(t, parent, "POST", "/v1/api-keys", `{`+same+`}`), 403, 1015, "key_exceeds_caller", "expires_at")
	checkDetails(t, "1015", e, map[string]any{"max_expires_at": events.FormatTime(expires)})
	wantError(t, env.signed(t, parent, "POST", "/v1/api-keys", `{`+same+`,"expires_at":"`+later+`","ip_allowlist":["127.0.0.1"]}`),
		403, 1015, "key_exceeds_caller", "expires_at")
	e = wantError(t, env.signed(t, parent, "POST", "/v1/api-keys", `{`+same+`,"expires_at":"`+events.FormatTime(expires)+`"}`),
		403, 1015, "key_exceeds_caller", "ip_allowlist")
	checkDetails(t, "1015", e, map[string]any{"allowed": []any{"127.0.0.0/8"}})
	wantError(t, env.signed(t, parent, "POST", "/v1/api-keys", `{`+same+`,"expires_at":"`+events.FormatTime(expires)+`","ip_allowlist":["126.0.0.0/7"]}`),
		403, 1015, "key_exceeds_caller", "ip_allowlist")
	wantError(t, env.signed(t, parent, "POST", "/v1/api-keys", `{"scopes":["orders.write"],"expires_at":"`+events.FormatTime(expires)+`","ip_allowlist":["127.0.0.1"]}`),
		403, 1005, "insufficient_scope", "scopes")
	if n := env.activeKeys(t); n != keys {
		t.Fatalf("%d keys after refusals, want %d", n, keys)
	}
	// Within itself it may: fewer scopes, an earlier expiry, a narrower allowlist.
	r := env.signed(t, parent, "POST", "/v1/api-keys", `{"scopes":["account.read"],"expires_at":"`+
		expires.Add(-time.Hour).Format(time.RFC3339Nano)+`","ip_allowlist":["127.0.0.1","127.9.0.0/16"]}`)
	checkFields(t, r, 201, nil)
	child := accounts.CreatedKey{Key: accounts.Key{ID: r.json["id"].(string)}, Secret: r.json["secret"].(string)}
	if a := env.signed(t, child, "GET", "/v1/account", ""); a.status != 200 {
		t.Fatalf("the child key: HTTP %d %s", a.status, a.body)
	}

	// PATCH: a wider key (all scopes, no expiry, no allowlist) made inactive by the owner.
	wide := env.key(t)
	if _, err := env.store.UpdateKey(context.Background(), env.acct.ID, wide.ID, accounts.KeyUpdate{IsActive: ptr(false),
		IPAllowlist: &[]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, "test"); err != nil {
		t.Fatal(err)
	}
	widePath := "/v1/api-keys/" + wide.ID
	e = wantError(t, env.signed(t, parent, "PATCH", widePath, `{"is_active":true}`), 403, 1005, "insufficient_scope", "is_active")
	wantError(t, env.signed(t, parent, "PATCH", widePath, `{"ip_allowlist":[]}`), 403, 1005, "insufficient_scope", "ip_allowlist")
	wantError(t, env.signed(t, wide, "GET", "/v1/account", ""), 401, 1007, "key_inactive", nil)
	// Narrowing a wider key, and changing its label, stay allowed.
	checkFields(t, env.signed(t, parent, "PATCH", widePath, `{"label":"ops","ip_allowlist":["127.0.0.1"]}`), 200,
		map[string]any{"label": "ops", "is_active": false})

	// A key within the caller: its allowlist cannot be cleared or widened past the caller's,
	// it can be narrowed, deactivated and reactivated.
	childPath := "/v1/api-keys/" + child.ID
	wantError(t, env.signed(t, parent, "PATCH", childPath, `{"ip_allowlist":[]}`), 403, 1015, "key_exceeds_caller", "ip_allowlist")
	wantError(t, env.signed(t, parent, "PATCH", childPath, `{"ip_allowlist":["10.0.0.1"]}`), 403, 1015, "key_exceeds_caller", "ip_allowlist")
	checkFields(t, env.signed(t, parent, "PATCH", childPath, `{"ip_allowlist":["127.0.0.0/8"],"is_active":false}`), 200,
		map[string]any{"ip_allowlist": []any{"127.0.0.0/8"}, "is_active": false})
	checkFields(t, env.signed(t, parent, "PATCH", childPath, `{"is_active":true}`), 200, map[string]any{"is_active": true})
	// The caller cannot clear its own allowlist either.
	wantError(t, env.signed(t, parent, "PATCH", "/v1/api-keys/"+parent.ID, `{"ip_allowlist":[]}`), 403, 1015, "key_exceeds_caller", "ip_allowlist")
	var audits int
	_ = env.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'api_key.update' AND details->>'key_id' = $1`, wide.ID).Scan(&audits)
	if audits != 2 {
		t.Errorf("%d update audit rows of the wide key, want 2 (the owner's setup and the narrowing)", audits)
	}
}

func ptr[T any](v T) *T { return &v }

// The account's owner (a dashboard session) keeps full power over keys: any scope, no
// expiry, no allowlist.
func TestOwnerSessionCreatesAnyKey(t *testing.T) {
	st := newSignupStack(t)
	s := st.signIn(t, newKey(t))
	all, _ := json.Marshal(scopes.All())
	r := st.do(t, "POST", "/v1/api-keys", "application/json", `{"scopes":`+string(all)+`}`, s.header(true)...)
	checkFields(t, r, 201, map[string]any{"expires_at": nil, "ip_allowlist": []any{}})
}
