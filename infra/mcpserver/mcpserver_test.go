package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"rental/infra/client"
	"rental/infra/mcpserver"
)

// connect serves New(opts) to an in-memory session of the SDK's client.
func connect(t *testing.T, opts mcpserver.Options) *mcp.ClientSession {
	t.Helper()
	s, err := mcpserver.New(client.New("http://127.0.0.1:1", "ak_live_x", "sk_live_x"), opts)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func names(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var out []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

// The tools a key's scopes allow: every tool without scopes given, the public ones and
// those of the named scopes otherwise. Each output schema is the OpenAPI document's answer
// schema with the components it reaches under $defs (no reference left to the document).
func TestToolsFollowTheKeysScopes(t *testing.T) {
	var all []string
	for _, nt := range mcpserver.ToolNames() {
		all = append(all, nt[0])
	}
	slices.Sort(all)
	cs := connect(t, mcpserver.Options{})
	if got := names(t, cs); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("no scopes given: %v, want %v", got, all)
	}
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(tl.OutputSchema)
		if strings.Contains(string(out), "#/components/") || !strings.Contains(string(out), `"$defs"`) {
			t.Errorf("%s: output schema %s", tl.Name, out)
		}
		writes := slices.Contains([]string{"place_order", "quote_order", "reclaim_order"}, tl.Name)
		if tl.Annotations == nil || writes == tl.Annotations.ReadOnlyHint {
			t.Errorf("%s: annotations %+v", tl.Name, tl.Annotations)
		}
	}
	public := []string{"estimate_order", "get_market", "get_prices", "get_resources"}
	if got := names(t, connect(t, mcpserver.Options{Scopes: []string{}})); fmt.Sprint(got) != fmt.Sprint(public) {
		t.Fatalf("no scope: %v", got)
	}
	got := names(t, connect(t, mcpserver.Options{Scopes: []string{"orders.read", "orders.write"}}))
	want := append(slices.Clone(public), "get_order", "list_orders", "place_order", "reclaim_order")
	slices.Sort(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("orders.read and orders.write: %v, want %v", got, want)
	}
}

// A call the API cannot answer is a tool error saying so, after the client's retries; an
// input outside its schema never reaches the API.
func TestToolErrors(t *testing.T) {
	cs := connect(t, mcpserver.Options{})
	ctx := context.Background()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "place_order", Arguments: map[string]any{
		"client_order_id": "order-0001", "receiver": "T", "amount": "many"}})
	if err != nil || !res.IsError {
		t.Fatalf("place_order with a string amount: %+v, %v", res, err)
	}
	for _, bad := range []map[string]any{
		{"max_price_sun": 0},               // no price stated
		{"tier": "2h"},                     // not a tier
		{"receiver": "0xabc"},              // not an address
		{"client_order_id": "has a space"}, // not a client_order_id
		{"amount": -100},                   // not an amount
	} {
		args := map[string]any{"client_order_id": "order-0001", "receiver": "TKX9kfcErE8F6vC4njzgbgPoJcggQiZrmA", "max_price_sun": 5_000_000}
		var field string
		for k, v := range bad {
			args[k], field = v, k
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "place_order", Arguments: args})
		if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, field) {
			t.Fatalf("place_order with %v: %+v, %v", bad, res, err)
		}
	}
}

// Any arguments an agent sends, to any tool, end in a result or a tool error: never a
// protocol failure or a crash of the server. The API is unreachable here and the retry
// budget tiny, so calls that pass their schema fail fast as tool errors too.
func FuzzToolArguments(f *testing.F) {
	for _, seed := range []struct{ tool, args string }{
		{"place_order", `{"client_order_id":"a","receiver":"TKX9kfcErE8F6vC4njzgbgPoJcggQiZrmA","max_price_sun":1,"resource":"energy","amount":65000,"tier":"1h"}`},
		{"place_order", `{"max_price_sun":-1}`},
		{"get_order", `{"id":"ord_1","client_order_id":"x"}`},
		{"get_order", `{}`},
		{"list_orders", `{"limit":0,"status":"active,expired"}`},
		{"estimate_order", `{"resource":"energy","amount":1e30,"tier":"1h"}`},
		{"get_resources", `{"address":"../../v1/balance"}`},
		{"estimate_transfer", `{"from_address":null}`},
		{"reclaim_order", `[]`},
		{"nope", `{}`},
	} {
		f.Add(seed.tool, seed.args)
	}
	s, err := mcpserver.New(client.New("http://127.0.0.1:1", "ak_live_x", "sk_live_x",
		client.WithPolicy(client.Policy{Initial: time.Millisecond, MaxWait: time.Millisecond, MaxElapsed: time.Millisecond})), mcpserver.Options{})
	if err != nil {
		f.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.Connect(ctx, st, nil); err != nil {
		f.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "fuzz", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		f.Fatal(err)
	}
	defer cs.Close()
	known := map[string]bool{}
	for _, nt := range mcpserver.ToolNames() {
		known[nt[0]] = true
	}
	f.Fuzz(func(t *testing.T, tool, args string) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
		switch {
		case !known[tool] || !json.Valid([]byte(args)):
			return // refused by the protocol layer: unknown tool or not JSON
		case err != nil:
			t.Fatalf("%s(%s): protocol error %v", tool, args, err)
		case !res.IsError:
			t.Fatalf("%s(%s) succeeded against an unreachable API: %+v", tool, args, res)
		}
	})
}
