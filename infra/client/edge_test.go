package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rental/infra/client"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/orders"
)

// devEdge is the dev stack (infra/cmd/devstack: edge, pricer, order processor, chainwatch,
// simulator, broker) on real Postgres and Redis, started for one test: the client is
// tested against the real edge, not a fake of it.
type devEdge struct {
	t   *testing.T
	api string // http://host:port of the edge
	sim string // http://host:port of the simulator
	log *bytes.Buffer
}

func startDevEdge(t *testing.T) *devEdge {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "devstack")
	if out, err := exec.Command("go", "build", "-o", bin, "rental/infra/cmd/devstack").CombinedOutput(); err != nil {
		t.Fatalf("build devstack: %v\n%s", err, out)
	}
	db := testenv.Postgres(t)
	api, sim := testenv.FreeAddr(t), testenv.FreeAddr(t)
	e := &devEdge{t: t, api: "http://" + api, sim: "http://" + sim, log: &bytes.Buffer{}}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+db.URL, "HTTP_ADDR="+api, "SIM_ADDR="+sim, "PROVIDER_SIM_ADDR="+testenv.FreeAddr(t),
		"KAFKA_BROKERS="+testenv.FreeAddr(t), "METRICS_ADDR=off", "DATA_DIR="+t.TempDir(),
		"PRICER_INTERVAL=300ms", "SIM_BLOCK_INTERVAL=100ms", "CONFIRMATIONS=1", "DEPOSIT_CONFIRMATIONS=1",
		"CHAIN_POLL_INTERVAL=100ms", "OUTBOX_SWEEP_INTERVAL=200ms")
	cmd.Stdout, cmd.Stderr = e.log, e.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("dev stack log:\n%s", e.log)
		}
	})
	e.eventually(30*time.Second, "GET /v1/status answers 200", func() bool {
		resp, err := http.Get(e.api + "/v1/status")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return e
}

func (e *devEdge) eventually(within time.Duration, what string, cond func() bool) {
	e.t.Helper()
	for began := time.Now(); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Since(began) > within {
			e.t.Fatalf("%s: not within %s", what, within)
		}
	}
}

// post sends an unsigned JSON request (signup calls, the simulator) and decodes a 2xx answer.
func (e *devEdge) post(url string, body any, out any, header ...string) {
	e.t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		e.t.Fatalf("POST %s: HTTP %d %s", url, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("POST %s: %v: %s", url, err, b)
		}
	}
}

// signup makes an account through the address challenge and returns an API key with scopes.
func (e *devEdge) signup(scopes ...string) (keyID, secret string) {
	e.t.Helper()
	w, err := tron.GenerateKey()
	if err != nil {
		e.t.Fatal(err)
	}
	owner := w.Address().String()
	var ch struct{ Nonce, Message string }
	e.post(e.api+"/v1/accounts/challenge", map[string]any{"address": owner}, &ch)
	sig, err := w.SignMessageV2([]byte(ch.Message))
	if err != nil {
		e.t.Fatal(err)
	}
	var boot struct {
		Token string `json:"bootstrap_token"`
	}
	e.post(e.api+"/v1/accounts/challenge/verify", map[string]any{"address": owner, "nonce": ch.Nonce, "signature": sig}, &boot)
	bearer := []string{"Authorization", "Bearer " + boot.Token}
	e.post(e.api+"/v1/accounts", map[string]any{"address": owner}, nil, bearer...)
	var key struct{ ID, Secret string }
	e.post(e.api+"/v1/api-keys", map[string]any{"scopes": scopes, "label": "client test"}, &key, bearer...)
	return key.ID, key.Secret
}

// activated returns a fresh address activated with 1 TRX from the simulator's faucet.
func (e *devEdge) activated() string {
	e.t.Helper()
	k, err := tron.GenerateKey()
	if err != nil {
		e.t.Fatal(err)
	}
	a := k.Address().String()
	e.post(e.sim+"/sim/trx/transfer", map[string]any{"to": a, "amount_sun": 1_000_000}, nil)
	e.eventually(10*time.Second, "receiver activated", func() bool {
		resp, err := http.Get(e.sim + "/sim/accounts/" + a)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var acc struct{ Activated bool }
		return json.NewDecoder(resp.Body).Decode(&acc) == nil && acc.Activated
	})
	return a
}

// The client against the real edge: signed reads, a deposit, orders created (and repeated
// with the same client_order_id), read back one by one, by client_order_id and page by
// page; API errors arrive typed.
func TestClientAgainstTheEdge(t *testing.T) {
	e := startDevEdge(t)
	ctx := context.Background()
	keyID, secret := e.signup("account.read", "deposits.read", "orders.read", "orders.write")
	c := client.New(e.api, keyID, secret)

	acct, err := c.Account(ctx)
	if err != nil || acct.Status != "unfunded" || acct.ID == "" || acct.BalanceSun != 0 {
		t.Fatalf("GET /v1/account: %+v, %v", acct, err)
	}
	bal, err := c.Balance(ctx)
	if err != nil || bal.BalanceSun != 0 || bal.AvailableSun != 0 {
		t.Fatalf("GET /v1/balance: %+v, %v", bal, err)
	}
	deps, err := c.DepositAddresses(ctx)
	if err != nil || len(deps.Data) != 2 || deps.Data[0].Address != deps.Data[1].Address {
		t.Fatalf("GET /v1/deposit-addresses: %+v, %v", deps, err)
	}

	// Typed errors: an order before any deposit is 4001 with the amounts in details, and
	// is not retried by the client (its cause is fixed by a deposit).
	receivers := []string{e.activated(), e.activated(), e.activated()}
	e.eventually(15*time.Second, "prices published", func() bool {
		_, err := c.Estimate(ctx, "energy", 65_000, "5m", "")
		return err == nil
	})
	first := client.OrderRequest{ClientOrderID: "client-test-0", Resource: "energy", Amount: 65_000, Tier: "5m", Receiver: receivers[0]}
	_, err = c.CreateOrder(ctx, first)
	var ae *client.Error
	if !errors.As(err, &ae) || ae.Status != 402 || ae.Code != 4001 || ae.Slug != "insufficient_funds" || !ae.Retryable ||
		ae.Details["required_sun"] == nil || ae.RequestID == "" || !errors.Is(err, apierr.InsufficientFunds) {
		t.Fatalf("order before the deposit: %v", err)
	}

	// Deposit 100 TRX and wait for the credit.
	e.post(e.sim+"/sim/trx/transfer", map[string]any{"to": deps.Data[0].Address, "amount_sun": 100_000_000}, nil)
	e.eventually(20*time.Second, "deposit credited", func() bool {
		b, err := c.Balance(ctx)
		return err == nil && b.BalanceSun == 100_000_000
	})

	est, err := c.Estimate(ctx, "energy", 65_000, "5m", receivers[0])
	if err != nil || est.TotalAmountSun <= 0 || est.ReceiverActivated == nil || !*est.ReceiverActivated {
		t.Fatalf("GET /v1/estimate: %+v, %v", est, err)
	}
	// The same request after the deposit: same client_order_id, now created.
	var created []orders.Record
	for i, r := range receivers {
		req := first
		req.ClientOrderID, req.Receiver = fmt.Sprintf("client-test-%d", i), r
		got, err := c.CreateOrder(ctx, req)
		if err != nil || got.Replayed || got.Response.Status != 201 || got.Order.ClientOrderID != req.ClientOrderID ||
			got.Order.Receiver != r || got.Order.Amount != 65_000 || got.Order.TotalAmountSun <= 0 {
			t.Fatalf("order %d: %+v, %v", i, got, err)
		}
		created = append(created, got.Order)
	}
	again, err := c.CreateOrder(ctx, first)
	if err != nil || !again.Replayed || again.Response.Status != 200 || again.Order.ID != created[0].ID ||
		again.Response.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat of client-test-0: %+v, %v", again, err)
	}
	conflict := first
	conflict.Amount = 70_000
	if _, err := c.CreateOrder(ctx, conflict); !errors.Is(err, apierr.IdempotencyConflict) {
		t.Fatalf("same client_order_id, other amount: %v, want 3010", err)
	}

	got, err := c.Order(ctx, created[1].ID)
	if err != nil || got.ID != created[1].ID || got.Receiver != receivers[1] {
		t.Fatalf("GET /v1/orders/%s: %+v, %v", created[1].ID, got, err)
	}
	byCID, found, err := c.OrderByClientID(ctx, "client-test-2")
	if err != nil || !found || byCID.ID != created[2].ID {
		t.Fatalf("by client_order_id: %+v %v %v", byCID, found, err)
	}
	if _, found, err := c.OrderByClientID(ctx, "never-sent"); err != nil || found {
		t.Fatalf("unknown client_order_id: found %v, %v", found, err)
	}
	if _, err := c.Order(ctx, "ord_00000000000000000000000000"); err == nil {
		t.Fatal("unknown order id: no error")
	} else if !errors.As(err, &ae) || ae.Status/100 != 4 || ae.Retryable {
		t.Fatalf("unknown order id: %v", err)
	}

	// Pages of two, newest first: [2 1] then [0], next_cursor null on the last page.
	var pages [][]string
	for p, err := range c.OrderPages(ctx, url.Values{"limit": {"2"}}) {
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, o := range p.Data {
			ids = append(ids, o.ID)
		}
		pages = append(pages, ids)
	}
	want := fmt.Sprint([][]string{{created[2].ID, created[1].ID}, {created[0].ID}})
	if fmt.Sprint(pages) != want {
		t.Fatalf("pages %v, want %v", pages, want)
	}
	n := 0
	for o, err := range c.Orders(ctx, url.Values{"limit": {"1"}}) {
		if err != nil {
			t.Fatal(err)
		}
		if o.ID != created[2-n].ID {
			t.Fatalf("item %d: %s", n, o.ID)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("Orders yielded %d, want 3", n)
	}

	// A wrong secret: 1002, not retried; a key without the scope: 1005.
	bad := client.New(e.api, keyID, secret+"x")
	if _, err := bad.Balance(ctx); !errors.Is(err, apierr.InvalidSignature) {
		t.Fatalf("wrong secret: %v", err)
	}
	readOnlyID, readOnlySecret := e.signup("account.read")
	if _, err := client.New(e.api, readOnlyID, readOnlySecret).Order(ctx, created[0].ID); !errors.As(err, &ae) ||
		ae.Code != 1005 || ae.Details["required_scope"] != "orders.read" {
		t.Fatalf("key without orders.read: %v", err)
	}
	if !strings.HasPrefix(keyID, "ak_live_") {
		t.Fatalf("key id %s", keyID)
	}

	// docs/integrating.md's curl signing helper, run as printed, signs calls the edge accepts.
	curl := docHelper(t)
	curl.env = []string{"BASE=" + e.api, "API_KEY=" + keyID, "API_SECRET=" + secret}
	var cb client.Balance
	curl.call(t, &cb, "GET", "/v1/balance")
	spent := created[0].TotalAmountSun + created[1].TotalAmountSun + created[2].TotalAmountSun
	if cb.BalanceSun < 100_000_000-spent || cb.BalanceSun > 100_000_000 || cb.AvailableSun != 100_000_000-spent { // held or captured
		t.Fatalf("curl helper: GET /v1/balance %+v", cb)
	}
	var page client.Page[orders.Record]
	curl.call(t, &page, "GET", "/v1/orders?limit=1&client_order_id=client-test-1")
	if len(page.Data) != 1 || page.Data[0].ID != created[1].ID {
		t.Fatalf("curl helper: GET with a query: %+v", page)
	}
	var replay orders.Record
	curl.call(t, &replay, "POST", "/v1/orders",
		fmt.Sprintf(`{"client_order_id":"client-test-2","resource":"energy","amount":65000,"tier":"5m","receiver":%q}`, receivers[2]))
	if replay.ID != created[2].ID {
		t.Fatalf("curl helper: POST with a body: %+v", replay)
	}
	curl.env = append(curl.env, "API_SECRET="+secret+"x") // the last value wins
	var refused struct{ Error struct{ Code int } }
	curl.call(t, &refused, "GET", "/v1/balance")
	if refused.Error.Code != 1002 {
		t.Fatalf("curl helper with a wrong secret: %+v", refused)
	}
}

// shellHelper runs the signing helper of docs/integrating.md with bash, curl and openssl.
type shellHelper struct {
	script string
	env    []string
}

func docHelper(t *testing.T) *shellHelper {
	t.Helper()
	doc, err := os.ReadFile("../../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- signing-helper -->")
	block, _, ok2 := strings.Cut(rest, "<!-- /signing-helper -->")
	if !ok || !ok2 {
		t.Fatal("docs/integrating.md: no <!-- signing-helper --> block")
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if !strings.HasPrefix(l, "```") {
			lines = append(lines, l)
		}
	}
	return &shellHelper{script: strings.Join(lines, "\n")}
}

func (h *shellHelper) call(t *testing.T, out any, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"-c", h.script + "\napi \"$@\"", "api"}, args...)...)
	cmd.Env = append(os.Environ(), h.env...)
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl helper %v: %v: %s", args, err, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("curl helper %v: %v: %s", args, err, b)
	}
}
