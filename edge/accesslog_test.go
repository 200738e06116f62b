package edge

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"rental/infra/reqsign"
	"rental/infra/testenv"
)

// Every API request leaves one JSON access line with its request id, route, status and
// caller, and the captured log never holds the key secret or the request's signature.
func TestAccessLogLineWithoutSecrets(t *testing.T) {
	var logs testenv.LogBuffer
	env := newAuthEnv(t, authEnvOptions{extra: func(o *Options) {
		o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	k := env.key(t)
	at := signNow()
	sig := reqsign.Headers(k.ID, k.Secret, at, "GET", "/v1/account", nil)[reqsign.HeaderSign]
	r := env.signedAt(t, k, at, "GET", "/v1/account", "")
	if r.status != 200 {
		t.Fatalf("GET /v1/account: %d %s", r.status, r.body)
	}
	id := r.header.Get(HeaderRequestID)
	bad := env.ts.do(t, "GET", "/v1/account", "", "", reqsign.HeaderKey, k.ID, reqsign.HeaderTimestamp, "1", reqsign.HeaderSign, "deadbeef"+sig[8:])
	if bad.status < 400 {
		t.Fatalf("badly signed request answered %d", bad.status)
	}

	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if m["msg"] == "request" && m["request_id"] == id {
			line = m
		}
	}
	if line == nil {
		t.Fatalf("no access line for request %s in:\n%s", id, logs.String())
	}
	for field, want := range map[string]any{"method": "GET", "route": "/v1/account", "status": float64(200),
		"account_id": env.acct.ID, "key_id": k.ID} {
		if line[field] != want {
			t.Errorf("access line %s = %v, want %v (%v)", field, line[field], want, line)
		}
	}
	if _, ok := line["duration_ms"].(float64); !ok {
		t.Errorf("access line has no duration_ms: %v", line)
	}
	all := logs.String()
	for name, secret := range map[string]string{"key secret": k.Secret, "signature": sig, "forged signature": "deadbeef" + sig[8:]} {
		if strings.Contains(all, secret) {
			t.Errorf("the log holds the %s", name)
		}
	}
}
