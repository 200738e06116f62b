package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rental/infra/testenv"
)

// The TypeScript client (infra/client/typescript), generated from the OpenAPI document and
// compiled with tsc --strict, works against the dev stack as an integrator uses it: its
// test/e2e.ts, run with Node, registers a webhook endpoint it serves itself, funds the
// account at its deposit address, waits for the credit, places an order, reads it back
// until active and verifies the signed order.confirmed delivery, all through the client.
// Signup (a wallet signature) and the receiver's activation are done here in Go.
func TestE2ETypeScriptClient(t *testing.T) {
	build := testenv.TypeScriptBuild(t, "infra/client/typescript")
	e := e2eStack(t, "WEBHOOK_ALLOW_LOOPBACK=true")
	e.scopes = []string{"webhooks.write"}
	e.signup()
	receiver := e.newReceiver()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(build, "test", "e2e.js"))
	cmd.Env = append(os.Environ(),
		"API_URL=http://"+e.s.api, "SIM_URL=http://"+e.s.sim,
		"KEY_ID="+e.keyID, "KEY_SECRET="+e.secret, "RECEIVER="+receiver)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node test/e2e.js: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var got struct {
		BalanceSun     int64    `json:"balance_sun"`
		OrderID        string   `json:"order_id"`
		CreatedStatus  int      `json:"created_status"`
		ReadStatus     string   `json:"read_status"`
		DelegateHashes []string `json:"delegate_hashes"`
		Event          string   `json:"event"`
		EventID        string   `json:"event_id"`
		EventOrderID   string   `json:"event_order_id"`
		EventDelivered int64    `json:"event_delivered_amount"`
		EventTest      bool     `json:"event_test"`
		ForgedRefused  bool     `json:"forged_refused"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("e2e.js output: %v\n%s", err, stdout.String())
	}
	t.Logf("TypeScript client: %s", lines[len(lines)-1])
	if got.BalanceSun < 100_000_000 || got.CreatedStatus != 201 || got.ReadStatus != "active" || len(got.DelegateHashes) != 1 ||
		got.Event != "order.confirmed" || got.EventOrderID != got.OrderID || got.EventDelivered != 65_000 || got.EventTest || !got.ForgedRefused ||
		!strings.HasPrefix(got.EventID, "evt_") {
		t.Fatalf("what the TypeScript client saw: %+v", got)
	}
	// The Go side agrees: the order the client placed is the account's, active, with the
	// same delegation.
	if o := e.c.order(got.OrderID); o.Status != "active" || o.Receiver != receiver || len(o.DelegateHashes) != 1 || o.DelegateHashes[0] != got.DelegateHashes[0] {
		t.Fatalf("GET /v1/orders/%s through the Go client: %+v", got.OrderID, o)
	}
}
