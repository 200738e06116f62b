package edge

import (
	"context"
	"encoding/json"
	"testing"
)

func TestPatchAccountLabel(t *testing.T) {
	st := newSignupStack(t)
	key := newKey(t)
	s := st.signIn(t, key)
	tok := bearer(st.bootstrap(t, key)) // to read GET /v1/account
	patch := func(body string, csrf bool) response {
		return st.do(t, "PATCH", "/v1/account", "application/json", body, s.header(csrf)...)
	}

	r := patch(`{"label":"Treasury bot"}`, true)
	if r.status != 200 || r.json["label"] != "Treasury bot" || r.json["id"] != s.body["account_id"] {
		t.Fatalf("set label: %d %s", r.status, r.body)
	}
	// The answer is the Account record exactly as GET /v1/account renders it.
	g := st.do(t, "GET", "/v1/account", "", "", tok...)
	if g.status != 200 {
		t.Fatalf("GET /v1/account: %d %s", g.status, g.body)
	}
	var a, b any
	json.Unmarshal(r.body, &a)
	json.Unmarshal(g.body, &b)
	if ja, _ := json.Marshal(a); string(ja) != func() string { jb, _ := json.Marshal(b); return string(jb) }() {
		t.Fatalf("PATCH and GET differ:\n%s\n%s", r.body, g.body)
	}

	// null clears it.
	r = patch(`{"label":null}`, true)
	if r.status != 200 {
		t.Fatalf("clear: %d %s", r.status, r.body)
	}
	if v, ok := r.json["label"]; !ok || v != nil {
		t.Fatalf("label not null: %s", r.body)
	}

	// Refusals change nothing.
	patch(`{"label":"Kept"}`, true)
	wantError(t, patch(``, true), 422, 2002, "empty_patch", nil)
	wantError(t, patch(`{}`, true), 422, 2002, "empty_patch", nil)
	wantError(t, patch(`{"label":""}`, true), 400, 2001, "validation_failed", "label")
	wantError(t, patch(`{"label":"bell\u0007"}`, true), 400, 2001, "validation_failed", "label")
	wantError(t, patch(`{"label":5}`, true), 400, 2001, "validation_failed", "label")
	wantError(t, patch(`{"status":"active"}`, true), 400, 2001, "validation_failed", "status")
	wantError(t, patch(`{"label":"Nope"}`, false), 403, 1014, "csrf_token_invalid", nil)
	wantError(t, st.do(t, "PATCH", "/v1/account", "application/json", `{"label":"Nope"}`), 401, 1013, "session_expired", nil)
	if g := st.do(t, "GET", "/v1/account", "", "", tok...); g.json["label"] != "Kept" {
		t.Fatalf("refused patches changed the label: %s", g.body)
	}
	var n int
	st.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'account.update' AND account_id = $1`,
		s.body["account_id"]).Scan(&n)
	if n != 3 {
		t.Errorf("%d account.update audit rows, want 3", n)
	}
}
