package edge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/valyala/fasthttp"

	"rental/consumers/webhookdelivery"
	"rental/infra/accounts"
	"rental/infra/idempotency"
	"rental/infra/kafka"
	"rental/infra/testenv"
	"rental/infra/webhooks"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/scopes"
	"rental/schemas/topics"
	"rental/schemas/webhooksig"
)

// The delivery history endpoint is this edge's addition to the spec (docs/webhooks.md).
func init() { ourAdditions = append(ourAdditions, "GET /v1/webhooks/{}/deliveries") }

// webhookSessions stands in for dashboard sessions: header X-Test-Session: <account>:<role>.
type webhookSessions struct{}

func (webhookSessions) Authenticate(_ context.Context, rc *fasthttp.RequestCtx) (*Principal, error) {
	v := string(rc.Request.Header.Peek("X-Test-Session"))
	acct, role, ok := strings.Cut(v, ":")
	if !ok {
		return nil, nil
	}
	return &Principal{AccountID: acct, Role: role, Wallet: "Ttest", AccountStatus: StatusActive}, nil
}

type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	bodies [][]byte
	errs   []string
}

func (h *hookReceiver) count() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.bodies) }

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.bodies = append(h.bodies, b)
		if err := webhooksig.Verify(h.secret, r.Header.Get("X-API-TIMESTAMP"), b, r.Header.Get("X-API-SIGN"), time.Now()); err != nil {
			h.errs = append(h.errs, err.Error())
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(202)
		_, _ = w.Write([]byte(strings.Repeat("x", 1000)))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

type publicResolver struct{}

func (publicResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "internal.example.com" {
		return []netip.Addr{netip.MustParseAddr("10.0.0.7")}, nil
	}
	return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
}

func newWebhookEnv(t *testing.T, p webhooks.Policy, testBudget ...redis_rate.Limit) *authEnv {
	t.Helper()
	return newAuthEnv(t, authEnvOptions{extra: func(o *Options) {
		pool := o.Accounts.(*accounts.Store).Pool()
		store, err := webhooks.NewStore(pool, testMasterKey)
		if err != nil {
			t.Fatal(err)
		}
		wo := WebhooksOptions{Store: store, Idempotency: idempotency.New(pool, idempotency.Options{}),
			Policy: p, Brand: "tronrent", Network: "nile"}
		if len(testBudget) > 0 {
			wo.Limiter, wo.TestBudget = o.Limiter, testBudget[0]
		}
		m, err := NewWebhooks(wo)
		if err != nil {
			t.Fatal(err)
		}
		o.Modules = append(o.Modules, m)
		o.Sessions = webhookSessions{}
	}})
}

// The webhook test call is no port scanner (docs/webhooks.md "Test calls"): each account
// has a budget of test calls (429 1100 beyond it, nothing sent), and a URL on a port
// other than 443 (or those configured) is refused at registration (2010 reason port).
func TestWebhookTestCallsBudgetedAndPortsLimited(t *testing.T) {
	env := newWebhookEnv(t, webhooks.Policy{AllowLoopback: true}, redis_rate.Limit{Rate: 2, Burst: 2, Period: time.Hour})
	rcv := newHookReceiver(t)
	k := env.key(t, scopes.WebhooksRead, scopes.WebhooksWrite)
	r := env.signed(t, k, "POST", "/v1/webhooks", `{"url":"`+rcv.srv.URL+`/a"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := r.json["id"].(string)
	for range 2 {
		if r := env.signed(t, k, "POST", "/v1/webhooks/"+id+"/test", ""); r.status != 200 {
			t.Fatalf("test call: %d %s", r.status, r.body)
		}
	}
	before := rcv.count()
	r = env.signed(t, k, "POST", "/v1/webhooks/"+id+"/test", "")
	wantError(t, r, 429, 1100, "rate_limited", nil)
	if r.header.Get("Retry-After") == "" || rcv.count() != before {
		t.Fatalf("over budget: Retry-After %q, %d deliveries after %d", r.header.Get("Retry-After"), rcv.count(), before)
	}
	// Another account's budget is its own.
	other := env.keyFor(t, env.newAccount(t).ID, accounts.NewKey{Scopes: []string{scopes.WebhooksRead, scopes.WebhooksWrite}})
	r = env.signed(t, other, "POST", "/v1/webhooks", `{"url":"`+rcv.srv.URL+`/b"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := env.signed(t, other, "POST", "/v1/webhooks/"+r.json["id"].(string)+"/test", ""); r.status != 200 {
		t.Fatalf("other account's test call: %d %s", r.status, r.body)
	}

	// Production policy: an HTTPS port only.
	prod := newWebhookEnv(t, webhooks.Policy{})
	pk := prod.key(t, scopes.WebhooksRead, scopes.WebhooksWrite)
	e := wantError(t, prod.signed(t, pk, "POST", "/v1/webhooks", `{"url":"https://93.184.216.34:22/"}`), 400, 2010, "invalid_webhook_url", "url")
	checkDetails(t, "2010", e, map[string]any{"reason": "port", "allowed_ports": []any{443.0}})
}

func TestWebhookEndpointLifecycle(t *testing.T) {
	env := newWebhookEnv(t, webhooks.Policy{AllowLoopback: true})
	rcv := newHookReceiver(t)
	k := env.key(t, scopes.WebhooksRead, scopes.WebhooksWrite)

	// Register: the secret comes once; no events list means every type.
	r := env.signed(t, k, "POST", "/v1/webhooks", `{"url":"`+rcv.srv.URL+`/a"}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	first := r.json
	secret, _ := first["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") || first["role"] != "primary" || first["events"] != nil || first["is_active"] != true {
		t.Fatalf("created record %s", r.body)
	}
	id := first["id"].(string)
	r = env.signed(t, k, "POST", "/v1/webhooks", `{"url":"`+rcv.srv.URL+`/b","events":["order.failed","order.confirmed","order.failed"],"role":"backup"}`)
	if r.status != 201 || r.json["role"] != "backup" {
		t.Fatalf("create backup: %d %s", r.status, r.body)
	}
	backupID := r.json["id"].(string)
	if evs, _ := r.json["events"].([]any); len(evs) != 2 {
		t.Errorf("events folded to %v", r.json["events"])
	}
	wantError(t, env.signed(t, k, "POST", "/v1/webhooks", `{"url":"`+rcv.srv.URL+`/c"}`), 409, 3013, "webhook_limit_reached", nil)

	// List: never a secret.
	r = env.signed(t, k, "GET", "/v1/webhooks", "")
	if r.status != 200 || strings.Contains(string(r.body), "secret") || len(r.json["data"].([]any)) != 2 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}

	// Swap roles atomically.
	r = env.signed(t, k, "PATCH", "/v1/webhooks/"+backupID, `{"role":"primary"}`)
	if r.status != 200 || r.json["role"] != "primary" {
		t.Fatalf("swap: %d %s", r.status, r.body)
	}
	r = env.signed(t, k, "GET", "/v1/webhooks", "")
	roles := map[string]string{}
	for _, e := range r.json["data"].([]any) {
		m := e.(map[string]any)
		roles[m["id"].(string)] = m["role"].(string)
	}
	if roles[id] != "backup" || roles[backupID] != "primary" {
		t.Errorf("roles after the swap: %v", roles)
	}
	// Other changes and refusals.
	r = env.signed(t, k, "PATCH", "/v1/webhooks/"+backupID, `{"events":null,"is_active":false}`)
	if r.status != 200 || r.json["events"] != nil || r.json["is_active"] != false {
		t.Errorf("patch: %d %s", r.status, r.body)
	}
	wantError(t, env.signed(t, k, "PATCH", "/v1/webhooks/"+id, `{}`), 422, 2002, "empty_patch", nil)
	wantError(t, env.signed(t, k, "PATCH", "/v1/webhooks/"+id, `{"events":[]}`), 400, 2001, "validation_failed", "events")
	wantError(t, env.signed(t, k, "PATCH", "/v1/webhooks/"+id, `{"events":["order.shipped"]}`), 400, 2001, "validation_failed", "events")
	wantError(t, env.signed(t, k, "PATCH", "/v1/webhooks/"+id, `{"role":"tertiary"}`), 400, 2001, "validation_failed", "role")
	wantError(t, env.signed(t, k, "PATCH", "/v1/webhooks/"+id, `{"url":"http://10.0.0.1/x"}`), 400, 2010, "invalid_webhook_url", "url")
	wantError(t, env.signed(t, k, "PATCH", "/v1/webhooks/wh_unknown", `{"is_active":true}`), 404, 3022, "object_not_found", "id")

	// Rotate: a new secret, once, used at once by the test call.
	r = env.signed(t, k, "POST", "/v1/webhooks/"+id+"/rotate-secret", "")
	newSecret, _ := r.json["secret"].(string)
	if r.status != 200 || newSecret == "" || newSecret == secret {
		t.Fatalf("rotate: %d %s", r.status, r.body)
	}
	rcv.mu.Lock()
	rcv.secret = newSecret
	rcv.mu.Unlock()
	r = env.signed(t, k, "POST", "/v1/webhooks/"+id+"/test", `{"event":"balance.credited"}`)
	if r.status != 200 || r.json["delivered"] != true || r.json["status_code"] != float64(202) ||
		len(r.json["response_body"].(string)) != 512 || r.json["latency_ms"] == nil {
		t.Fatalf("test call: %d %s", r.status, r.body)
	}
	rcv.mu.Lock()
	if len(rcv.errs) > 0 || len(rcv.bodies) != 1 {
		t.Fatalf("receiver: %d bodies, errors %v", len(rcv.bodies), rcv.errs)
	}
	var ev map[string]any
	_ = json.Unmarshal(rcv.bodies[0], &ev)
	rcv.mu.Unlock()
	if ev["test"] != true || ev["event"] != "balance.credited" || ev["event_id"] != r.json["event_id"] {
		t.Errorf("test event %v", ev)
	}
	// A test delivery the receiver refuses is reported, not retried.
	rcv.mu.Lock()
	rcv.secret = secret // the old one: every signature now fails
	rcv.mu.Unlock()
	r = env.signed(t, k, "POST", "/v1/webhooks/"+id+"/test", "")
	if r.json["delivered"] != false || r.json["status_code"] != float64(401) {
		t.Errorf("refused test call: %s", r.body)
	}
	time.Sleep(100 * time.Millisecond)
	rcv.mu.Lock()
	if len(rcv.bodies) != 2 {
		t.Errorf("receiver got %d requests, want 2 (a test call is never retried)", len(rcv.bodies))
	}
	rcv.mu.Unlock()
	// Test deliveries are not in the history.
	r = env.signed(t, k, "GET", "/v1/webhooks/"+id+"/deliveries", "")
	if r.status != 200 || len(r.json["data"].([]any)) != 0 || r.json["next_cursor"] != nil {
		t.Errorf("history after test calls: %d %s", r.status, r.body)
	}

	// Delete: hard, then the role is free again.
	if r = env.signed(t, k, "DELETE", "/v1/webhooks/"+backupID, ""); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	wantError(t, env.signed(t, k, "DELETE", "/v1/webhooks/"+backupID, ""), 404, 3022, "object_not_found", "id")
	wantError(t, env.signed(t, k, "POST", "/v1/webhooks", `{"url":"`+rcv.srv.URL+`/d","role":"backup"}`), 409, 3014, "webhook_role_taken", "role")
	r = env.signed(t, k, "POST", "/v1/webhooks", `{"url":"`+rcv.srv.URL+`/d"}`)
	if r.status != 201 || r.json["role"] != "primary" {
		t.Errorf("re-register: %d %s", r.status, r.body)
	}
}

func TestWebhookCreateIsIdempotentAndShowsTheSecretOnce(t *testing.T) {
	env := newWebhookEnv(t, webhooks.Policy{AllowLoopback: true})
	k := env.key(t, scopes.WebhooksWrite)
	body := `{"url":"http://127.0.0.1:9/hook"}`
	a := env.signed(t, k, "POST", "/v1/webhooks", body, "Idempotency-Key", "create-hook-1")
	b := env.signed(t, k, "POST", "/v1/webhooks", body, "Idempotency-Key", "create-hook-1")
	if a.status != 201 || a.json["secret"] == nil {
		t.Fatalf("first: %d %s", a.status, a.body)
	}
	if b.status != 200 || b.header.Get("Idempotent-Replayed") != "true" || b.json["secret"] != nil || b.json["id"] != a.json["id"] {
		t.Fatalf("replay: %d %s", b.status, b.body)
	}
}

func TestWebhookAuth(t *testing.T) {
	env := newWebhookEnv(t, webhooks.Policy{AllowLoopback: true})
	body := `{"url":"http://127.0.0.1:9/hook"}`
	// A bootstrap token is refused.
	wantError(t, env.ts.do(t, "POST", "/v1/webhooks", "application/json", body, "Authorization", "Bearer abt_"+env.acct.ID),
		401, 1011, "bootstrap_token_expired", nil)
	wantError(t, env.ts.do(t, "GET", "/v1/webhooks", "", "", "Authorization", "Bearer abt_"+env.acct.ID),
		401, 1011, "bootstrap_token_expired", nil)
	// Scopes.
	reader := env.key(t, scopes.WebhooksRead)
	wantError(t, env.signed(t, reader, "POST", "/v1/webhooks", body), 403, 1005, "insufficient_scope", nil)
	if r := env.signed(t, reader, "GET", "/v1/webhooks", ""); r.status != 200 {
		t.Errorf("read key list: %d %s", r.status, r.body)
	}
	other := env.key(t, scopes.OrdersRead)
	wantError(t, env.signed(t, other, "GET", "/v1/webhooks", ""), 403, 1005, "insufficient_scope", nil)
	// A dashboard session works; a viewer may read but not change.
	sess := []string{"X-Test-Session", env.acct.ID + ":editor"}
	r := env.ts.do(t, "POST", "/v1/webhooks", "application/json", body, sess...)
	if r.status != 201 {
		t.Fatalf("session create: %d %s", r.status, r.body)
	}
	viewer := []string{"X-Test-Session", env.acct.ID + ":viewer"}
	if r := env.ts.do(t, "GET", "/v1/webhooks/"+r.json["id"].(string)+"/deliveries", "", "", viewer...); r.status != 200 {
		t.Errorf("viewer history: %d %s", r.status, r.body)
	}
	wantError(t, env.ts.do(t, "POST", "/v1/webhooks", "application/json", body, viewer...), 403, 1005, "insufficient_scope", nil)
	// Another account's endpoint does not exist for this one.
	otherAcct := env.newAccount(t)
	ok := env.keyFor(t, otherAcct.ID, accounts.NewKey{Scopes: []string{scopes.WebhooksRead, scopes.WebhooksWrite}})
	r = env.signed(t, ok, "GET", "/v1/webhooks", "")
	if len(r.json["data"].([]any)) != 0 {
		t.Errorf("another account sees %s", r.body)
	}
}

// Registration refuses unsafe URLs with 2010 (the full matrix is in infra/webhooks).
func TestWebhookURLSafety(t *testing.T) {
	env := newWebhookEnv(t, webhooks.Policy{Resolver: publicResolver{}})
	k := env.key(t, scopes.WebhooksRead, scopes.WebhooksWrite)
	for _, u := range []string{
		"http://hooks.example.com/x", "https://u:p@hooks.example.com/x", "https://hooks.example.com/" + strings.Repeat("a", 2100),
		"https://10.1.1.1/x", "https://169.254.169.254/x", "https://[::1]/x", "https://[::ffff:127.0.0.1]/x",
		"https://2130706433/x", "https://0x7f000001/x", "https://0177.0.0.1/x", "https://localhost/x",
		"https://internal.example.com/x",
	} {
		b, _ := json.Marshal(map[string]string{"url": u})
		wantError(t, env.signed(t, k, "POST", "/v1/webhooks", string(b)), 400, 2010, "invalid_webhook_url", "url")
	}
	if r := env.signed(t, k, "POST", "/v1/webhooks", `{"url":"https://hooks.example.com/rental"}`); r.status != 201 {
		t.Errorf("a public https URL: %d %s", r.status, r.body)
	}
	// The test call dials through the same guard: a loopback listener gets no connection.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			got <- struct{}{}
			c.Close()
		}
	}()
	var id string
	r := env.signed(t, k, "GET", "/v1/webhooks", "")
	id = r.json["data"].([]any)[0].(map[string]any)["id"].(string)
	// Point the stored URL at a name resolving to loopback at dial time (the registration
	// check passes with the fake resolver; the dial check looks at the real address).
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if _, err := env.db.Pool.Exec(context.Background(), `UPDATE webhook_endpoints SET url = $1 WHERE id = $2`,
		"https://localhost:"+port+"/x", id); err != nil {
		t.Fatal(err)
	}
	r = env.signed(t, k, "POST", "/v1/webhooks/"+id+"/test", "")
	if r.status != 200 || r.json["delivered"] != false || r.json["error"] != "target address not allowed" {
		t.Errorf("test call to a rebound name: %d %s", r.status, r.body)
	}
	select {
	case <-got:
		t.Error("the loopback listener was connected to")
	case <-time.After(100 * time.Millisecond):
	}
}

// Every type of the catalogue has a test payload.
func TestWebhookTestPayloadForEveryType(t *testing.T) {
	for _, typ := range webhooks.EventTypes() {
		if events.SampleData(typ) == nil {
			t.Errorf("%s has no test payload", typ)
		}
	}
}

// End to end: an endpoint registered through the API receives an event from Kafka through
// the deliverer, signed with the secret the API returned, and the API shows the attempts.
func TestWebhookRegisteredEndpointReceivesEventsAndShowsHistory(t *testing.T) {
	env := newWebhookEnv(t, webhooks.Policy{AllowLoopback: true})
	k := env.key(t, scopes.WebhooksRead, scopes.WebhooksWrite)
	var mu sync.Mutex
	var attempts []string
	var secret string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := webhooksig.Verify(secret, r.Header.Get("X-API-TIMESTAMP"), b, r.Header.Get("X-API-SIGN"), time.Now()); err != nil {
			t.Errorf("signature: %v", err)
		}
		attempts = append(attempts, r.Header.Get("X-Delivery-Attempt"))
		if len(attempts) == 1 {
			w.WriteHeader(503)
		}
	}))
	defer srv.Close()
	r := env.signed(t, k, "POST", "/v1/webhooks", `{"url":"`+srv.URL+`/hook","events":["order.confirmed"]}`)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	mu.Lock()
	secret = r.json["secret"].(string)
	mu.Unlock()
	id := r.json["id"].(string)

	broker := testenv.Kafka(t, testenv.SyntheticPayloads) // hand-made order events below
	store, err := webhooks.NewStore(env.db.Pool, testMasterKey)
	if err != nil {
		t.Fatal(err)
	}
	d, err := webhookdelivery.New(webhookdelivery.Options{Brokers: []string{broker}, Store: store, Brand: "tronrent",
		Policy: webhooks.Policy{AllowLoopback: true}, Delays: []time.Duration{200 * time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	prod, err := kafka.NewClient([]string{broker})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for _, typ := range []string{"order.failed", "order.confirmed"} { // the filter lets only the second through
		ev, _ := events.New(typ, env.acct.ID, network.Nile, map[string]any{"order_id": "ord_e2e", "tier": "1h"})
		v, _ := json.Marshal(ev)
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topics.OrderEvents.Name, Key: []byte("ord_e2e"), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(attempts)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts arrived", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// History, newest first, one per page.
	var rows []map[string]any
	cursor := ""
	for page := 0; page < 3; page++ {
		target := "/v1/webhooks/" + id + "/deliveries?limit=1"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		r := env.signed(t, k, "GET", target, "")
		if r.status != 200 {
			t.Fatalf("history: %d %s", r.status, r.body)
		}
		for _, x := range r.json["data"].([]any) {
			rows = append(rows, x.(map[string]any))
		}
		next, _ := r.json["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(rows) != 2 {
		t.Fatalf("history rows %v", rows)
	}
	if rows[0]["attempt"] != float64(2) || rows[0]["status"] != "succeeded" || rows[0]["next"] != "done" || rows[0]["event"] != "order.confirmed" {
		t.Errorf("newest %v", rows[0])
	}
	if rows[1]["attempt"] != float64(1) || rows[1]["status"] != "failed" || rows[1]["status_code"] != float64(503) ||
		rows[1]["next"] != "retry" || rows[1]["next_attempt_at"] == nil || rows[1]["error"] != "non-2xx answer" {
		t.Errorf("oldest %v", rows[1])
	}
	wantError(t, env.signed(t, k, "GET", "/v1/webhooks/"+id+"/deliveries?limit=0", ""), 400, 2001, "validation_failed", "limit")
}
