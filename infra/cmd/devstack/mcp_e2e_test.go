package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"rental/infra/mcpserver"
	"rental/infra/testenv"
	"rental/infra/tron"
)

// mcpSession is a session of the SDK's own client with the MCP server binary (infra/cmd/mcp).
type mcpSession struct {
	t  *testing.T
	cs *mcp.ClientSession
}

func buildMCP(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcp")
	if out, err := exec.Command("go", "build", "-o", bin, "rental/infra/cmd/mcp").CombinedOutput(); err != nil {
		t.Fatalf("build infra/cmd/mcp: %v\n%s", err, out)
	}
	return bin
}

// call calls a tool and decodes its structured result into out; it fails the test on a tool
// error unless wantError, and then returns the error text.
func (m *mcpSession) call(name string, args map[string]any, out any, wantError bool) string {
	m.t.Helper()
	res, err := m.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		m.t.Fatalf("%s: protocol error %v", name, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError != wantError {
		m.t.Fatalf("%s(%v): isError %v, want %v: %s", name, args, res.IsError, wantError, text)
	}
	if !wantError && out != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, out); err != nil {
			m.t.Fatalf("%s: structured content %s: %v", name, raw, err)
		}
	}
	return text
}

// apiError decodes the API envelope an MCP tool error carries.
func apiError(t *testing.T, text string) (code int, slug string, retryable bool) {
	t.Helper()
	var env struct {
		Error struct {
			Code      int    `json:"code"`
			Slug      string `json:"slug"`
			Retryable bool   `json:"retryable"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &env); err != nil {
		t.Fatalf("tool error is not the API's envelope: %q", text)
	}
	return env.Error.Code, env.Error.Slug, env.Error.Retryable
}

// The MCP server for agents, driven by the SDK's own client over stdio (the binary started
// as a subprocess, as an agent starts it) against a dev stack: every tool listed with input
// and output schemas, reads of prices, the market, an estimate, a transfer estimate, an
// address's resources and the balance; a quote; an order refused while its stated price is
// below the live total (nothing charged), then placed at the stated price, repeated without
// a second charge, read by id and by client_order_id, listed, confirmed and reclaimed. Over
// streamable HTTP: a key's scopes limit the tools offered and the bearer token is required.
func TestMCPServerAgainstTheDevStack(t *testing.T) {
	t.Parallel() // a stack of its own: runs beside the other parallel test of the package
	e := e2eStack(t, "MARKET_FEEDS=off")
	e.scopes = []string{"quotes.write", "estimates.read"}
	e.signup()
	e.deposit(100_000_000)
	bin := buildMCP(t)
	ctx := context.Background()
	env := append(os.Environ(), "RENTAL_API_URL=http://"+e.s.api, "RENTAL_API_KEY="+e.keyID, "RENTAL_API_SECRET="+e.secret)

	cmd := exec.Command(bin)
	cmd.Env = env
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "devstack-test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	m := &mcpSession{t: t, cs: cs}

	// Every tool, each with an input schema of type object and an output schema.
	var listed []string
	for tl, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, tl.Name)
		in, _ := json.Marshal(tl.InputSchema)
		out, _ := json.Marshal(tl.OutputSchema)
		if !strings.Contains(string(in), `"type":"object"`) || !strings.Contains(string(out), `"$defs"`) || tl.Description == "" {
			t.Errorf("tool %s: input schema %s, output schema of %d bytes, description %q", tl.Name, in, len(out), tl.Description)
		}
	}
	var want []string
	for _, nt := range mcpserver.ToolNames() {
		want = append(want, nt[0])
	}
	slices.Sort(want)
	if fmt.Sprint(listed) != fmt.Sprint(want) {
		t.Fatalf("tools %v, want %v", listed, want)
	}

	// Reads.
	var prices struct {
		Items []struct {
			Resource, Tier string
			Available      bool
		}
	}
	eventually(t, 15*time.Second, "prices published", func() bool {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_prices", Arguments: map[string]any{"resource": "energy"}})
		if err != nil || res.IsError {
			return false
		}
		raw, _ := json.Marshal(res.StructuredContent)
		return json.Unmarshal(raw, &prices) == nil && len(prices.Items) > 0
	})
	for _, it := range prices.Items {
		if it.Resource != "energy" {
			t.Fatalf("get_prices(energy) has a %s row", it.Resource)
		}
	}
	var board map[string]any
	m.call("get_market", nil, &board, false)
	var bal struct {
		AvailableSun int64 `json:"available_sun"`
	}
	m.call("get_balance", nil, &bal, false)
	if bal.AvailableSun != 100_000_000 {
		t.Fatalf("get_balance: %+v", bal)
	}
	k, _ := tron.GenerateKey()
	fresh := k.Address().String() // never activated
	var est struct {
		TotalAmountSun    int64 `json:"total_amount_sun"`
		ActivateAmountSun int64 `json:"activate_amount_sun"`
		ReceiverActivated *bool `json:"receiver_activated"`
	}
	m.call("estimate_order", map[string]any{"resource": "energy", "amount": 65_000, "tier": "1h", "receiver": fresh}, &est, false)
	if est.TotalAmountSun <= est.ActivateAmountSun || est.ActivateAmountSun <= 0 || est.ReceiverActivated == nil || *est.ReceiverActivated {
		t.Fatalf("estimate_order for a fresh receiver: %+v", est)
	}
	var res struct {
		Address   string `json:"address"`
		Activated bool   `json:"activated"`
	}
	m.call("get_resources", map[string]any{"address": fresh}, &res, false)
	if res.Address != fresh || res.Activated {
		t.Fatalf("get_resources(fresh): %+v", res)
	}
	from := e.newReceiver()
	var tr struct {
		EnergyRequired    int64 `json:"energy_required"`
		RecommendedAmount int64 `json:"recommended_amount"`
	}
	m.call("estimate_transfer", map[string]any{"from_address": from, "to_address": fresh}, &tr, false)
	if tr.EnergyRequired <= 0 || tr.RecommendedAmount < tr.EnergyRequired {
		t.Fatalf("estimate_transfer: %+v", tr)
	}
	var quote struct {
		QuoteID        string `json:"id"`
		TotalAmountSun int64  `json:"total_amount_sun"`
	}
	m.call("quote_order", map[string]any{"resource": "energy", "amount": 65_000, "tier": "1h"}, &quote, false)
	if quote.QuoteID == "" || quote.TotalAmountSun <= 0 {
		t.Fatalf("quote_order: %+v", quote)
	}
	if _, _, r := apiError(t, m.call("get_order", map[string]any{"id": "ord_00000000000000000000000000"}, nil, true)); r {
		t.Fatal("get_order of an unknown id: retryable")
	}
	if code, _, _ := apiError(t, m.call("get_order", map[string]any{"client_order_id": "never-sent-0"}, nil, true)); code != 3001 {
		t.Fatalf("get_order by an unknown client_order_id: %d", code)
	}

	// place_order states the price before it spends: without max_price_sun the call is
	// refused by its schema, below the live total by the API (3006); nothing is charged.
	order := map[string]any{"client_order_id": "mcp-order-0001", "resource": "energy", "amount": 65_000, "tier": "1h",
		"receiver": fresh, "activate": true}
	if text := m.call("place_order", order, nil, true); !strings.Contains(text, "max_price_sun") {
		t.Fatalf("place_order without max_price_sun: %s", text)
	}
	order["max_price_sun"] = est.TotalAmountSun - 1
	if code, slug, _ := apiError(t, m.call("place_order", order, nil, true)); code != 3006 || slug != "price_above_limit" {
		t.Fatalf("place_order below the live total: %d %s", code, slug)
	}
	m.call("get_balance", nil, &bal, false)
	if bal.AvailableSun != 100_000_000 {
		t.Fatalf("after a refused order the balance is %+v", bal)
	}
	order["max_price_sun"] = est.TotalAmountSun
	var placed struct {
		ID             string `json:"id"`
		Status         string `json:"status"`
		TotalAmountSun int64  `json:"total_amount_sun"`
	}
	text := m.call("place_order", order, &placed, false)
	if placed.ID == "" || placed.Status != "created" || placed.TotalAmountSun != est.TotalAmountSun ||
		!strings.Contains(text, fmt.Sprintf("total_amount_sun %d", est.TotalAmountSun)) {
		t.Fatalf("place_order: %+v: %s", placed, text)
	}
	var again struct{ ID string }
	if text := m.call("place_order", order, &again, false); again.ID != placed.ID || !strings.Contains(text, "nothing more charged") {
		t.Fatalf("place_order repeated: %s %s", again.ID, text)
	}
	m.call("get_balance", nil, &bal, false)
	if bal.AvailableSun != 100_000_000-placed.TotalAmountSun {
		t.Fatalf("after the order (and its repeat) the balance is %+v, want %d less", bal, placed.TotalAmountSun)
	}
	var got struct{ ID, Status string }
	m.call("get_order", map[string]any{"client_order_id": "mcp-order-0001"}, &got, false)
	if got.ID != placed.ID {
		t.Fatalf("get_order by client_order_id: %+v", got)
	}
	eventually(t, 30*time.Second, "the order active through get_order", func() bool {
		m.call("get_order", map[string]any{"id": placed.ID}, &got, false)
		return got.Status == "active"
	})
	var page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	m.call("list_orders", map[string]any{"status": "active", "limit": 10}, &page, false)
	if len(page.Data) != 1 || page.Data[0].ID != placed.ID || page.NextCursor != nil {
		t.Fatalf("list_orders: %+v", page)
	}
	var reclaimed struct{ ID string }
	m.call("reclaim_order", map[string]any{"id": placed.ID}, &reclaimed, false)
	if reclaimed.ID != placed.ID {
		t.Fatalf("reclaim_order: %+v", reclaimed)
	}
	eventually(t, 30*time.Second, "the order reclaimed", func() bool {
		m.call("get_order", map[string]any{"id": placed.ID}, &got, false)
		return got.Status == "reclaimed"
	})

	// Streamable HTTP with a bearer token and a key limited to account.read: the public
	// tools and get_balance only.
	addr := testenv.FreeAddr(t)
	hcmd := exec.Command(bin, "-http", addr)
	hcmd.Env = append(env, "RENTAL_API_SCOPES=account.read", "RENTAL_MCP_TOKEN=test-token-123")
	hcmd.Stderr = os.Stderr
	if err := hcmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hcmd.Process.Signal(syscall.SIGTERM); _ = hcmd.Wait() })
	eventually(t, 10*time.Second, "the HTTP transport listening", func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusUnauthorized
	})
	bearer := &http.Client{Transport: headerTransport{"Authorization", "Bearer test-token-123"}}
	hs, err := mcp.NewClient(&mcp.Implementation{Name: "devstack-test-http", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/", HTTPClient: bearer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	var limited []string
	for tl, err := range hs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		limited = append(limited, tl.Name)
	}
	slices.Sort(limited)
	if fmt.Sprint(limited) != fmt.Sprint([]string{"estimate_order", "get_balance", "get_market", "get_prices", "get_resources"}) {
		t.Fatalf("tools for a key with account.read: %v", limited)
	}
	hm := &mcpSession{t: t, cs: hs}
	hm.call("get_balance", nil, &bal, false)
	if bal.AvailableSun != 100_000_000-placed.TotalAmountSun {
		t.Fatalf("get_balance over HTTP: %+v", bal)
	}
}

// headerTransport adds one header to every request.
type headerTransport [2]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h[0], h[1])
	return http.DefaultTransport.RoundTrip(r)
}
