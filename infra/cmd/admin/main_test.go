package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"rental/infra/accounts"
	"rental/infra/deposits"
	"rental/infra/ledgerstore"
	"rental/infra/marketstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/network"
)

// The support commands against a real database, as an operator runs them: every change is
// audited with its actor and reason, held deposits are credited with balance.credited, and
// the invariants command passes afterwards (and fails on a tampered ledger).
func TestAdminCommands(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("ADMIN_OPERATOR", "alice")
	t.Setenv("NETWORK", "nile")
	t.Setenv("DEPOSIT_HD_KEY", deposits.DevSeedHex)
	t.Setenv("USDT_RATE_SUN", "3000000")
	t.Setenv("USDT_SPREAD_BPS", "100")

	store, _ := accounts.New(db.Pool, accounts.Options{})
	owner, _ := tron.GenerateKey()
	acc, _, err := store.CreateOrGetByOwner(ctx, network.Nile, owner.Address(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := func(wantCode int, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		code, err := run(ctx, args, &out)
		if code != wantCode {
			t.Fatalf("admin %s: exit %d (%v), want %d; output:\n%s", strings.Join(args, " "), code, err, wantCode, out.String())
		}
		return out.String()
	}
	who := []string{"-reason", "ticket 42"}

	// Refusals: no reason; an actor typed as a flag (the operator comes from the environment).
	admin(2, "adjust", "-account", acc.ID, "-amount-sun", "5000000", "-ref", "T-1")
	admin(2, "adjust", "-account", acc.ID, "-amount-sun", "5000000", "-ref", "T-1", "-reason", "x", "-actor", "mallory")
	admin(2, "suspend", "-account", acc.ID)

	out := admin(0, append([]string{"adjust", "-account", acc.ID, "-amount-sun", "5000000", "-ref", "T-1"}, who...)...)
	if !strings.Contains(out, "balance 5000000") {
		t.Errorf("adjust: %s", out)
	}
	if out := admin(0, append([]string{"adjust", "-account", acc.ID, "-amount-sun", "5000000", "-ref", "T-1"}, who...)...); !strings.Contains(out, "already applied") {
		t.Errorf("repeated adjust: %s", out)
	}

	// A held USDT deposit (below the minimum) credited by support at the configured rate.
	dep := events.NewID("dep")
	tx := strings.Repeat("ab", 32)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO deposits (id, tx_hash, log_index, fact_id, block_num, block_id, block_time,
		account_id, address, sender, asset, amount, status) VALUES ($1, $2, 0, 'cf_x', 7, 'b', now(), $3, 'Taddr', 'Tsender', 'USDT', 3000000, 'held_below_min')`,
		dep, tx, acc.ID); err != nil {
		t.Fatal(err)
	}
	if out := admin(0, "held", "-account", acc.ID); !strings.Contains(out, dep) || !strings.Contains(out, "held_below_min") {
		t.Errorf("held: %s", out)
	}
	// 3 USDT at 3 TRX less 1 %: 8.91 TRX.
	if out := admin(0, append([]string{"credit-held", "-deposit", dep}, who...)...); !strings.Contains(out, "8910000 SUN") {
		t.Errorf("credit-held: %s", out)
	}
	admin(1, append([]string{"credit-held", "-deposit", dep}, who...)...) // not held any more

	var ev []byte
	if err := db.Pool.QueryRow(ctx, `SELECT value FROM outbox WHERE key = $1 AND headers->>'event' = 'balance.credited' ORDER BY id DESC LIMIT 1`, acc.ID).Scan(&ev); err != nil {
		t.Fatal(err)
	}
	var env events.Envelope
	_ = json.Unmarshal(ev, &env)
	var d events.BalanceCredited
	_ = json.Unmarshal(env.Data, &d)
	if d.Reason != "deposit" || d.Asset != "USDT" || d.AmountSun != 8_910_000 || *d.USDTAmount != "3" || *d.Rate != 2_970_000 || *d.TxHash != tx {
		t.Errorf("balance.credited of the held deposit: %+v", d)
	}

	// Status: suspend, unsuspend (back to active: it has postings), close.
	admin(0, append([]string{"suspend", "-account", acc.ID}, who...)...)
	admin(1, append([]string{"suspend", "-account", acc.ID}, who...)...)
	if out := admin(0, append([]string{"unsuspend", "-account", acc.ID}, who...)...); !strings.Contains(out, "is now active") {
		t.Errorf("unsuspend: %s", out)
	}

	// Rotation: the first call issues, the second rotates, the third is too soon (3018).
	admin(0, append([]string{"rotate-address", "-account", acc.ID}, who...)...)
	if out := admin(0, append([]string{"rotate-address", "-account", acc.ID}, who...)...); !strings.Contains(out, "keeps crediting until") {
		t.Errorf("rotate: %s", out)
	}
	admin(1, append([]string{"rotate-address", "-account", acc.ID}, who...)...)

	admin(0, append([]string{"low-threshold", "-account", acc.ID, "-sun", "2000000"}, who...)...)
	admin(2, append([]string{"low-threshold", "-account", acc.ID}, who...)...)
	admin(0, append([]string{"close", "-account", acc.ID}, who...)...)

	audit, err := store.Audit(ctx, acc.ID, 50)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]int{}
	for _, a := range audit {
		actions[a.Action]++
		if a.Actor != "support:alice" || a.Details["reason"] != "ticket 42" {
			t.Errorf("audit row %+v", a)
		}
	}
	for _, want := range []string{"ledger.adjustment", "deposit.credit_held", "account.suspend", "account.unsuspend", "account.close", "deposit_address.rotate", "ledger.low_threshold"} {
		if actions[want] != 1 {
			t.Errorf("audit %s: %d rows, want 1 (%v)", want, actions[want], actions)
		}
	}

	if out := admin(0, "invariants"); !strings.Contains(out, "hold") {
		t.Errorf("invariants: %s", out)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE ledger_accounts SET balance_sun = balance_sun + 1 WHERE account_id = $1`, acc.ID); err != nil {
		t.Fatal(err)
	}
	if out := admin(1, "invariants"); !strings.Contains(out, "balances") {
		t.Errorf("invariants on a tampered ledger: %s", out)
	}
}

// market-provider edits the board's operator data; flags not given keep what is stored.
func TestAdminMarketProvider(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("ADMIN_OPERATOR", "alice")
	t.Setenv("NETWORK", "nile")
	admin := func(wantCode int, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		code, err := run(ctx, append([]string{"market-provider"}, args...), &out)
		if code != wantCode {
			t.Fatalf("admin market-provider %s: exit %d (%v), want %d; output:\n%s", strings.Join(args, " "), code, err, wantCode, out.String())
		}
		return out.String()
	}
	who := []string{"-reason", "listing"}
	admin(2, "-slug", "simcheap", "-name", "Sim Cheap")                            // no reason
	admin(2, append([]string{"-slug", "simcheap", "-kinds", "api,tv"}, who...)...) // unknown kind
	admin(0, append([]string{"-slug", "simcheap", "-name", "Sim Cheap", "-kinds", "api,bot", "-link", "site=https://cheap.example", "-link", "telegram=https://t.me/cheap"}, who...)...)
	admin(0, append([]string{"-slug", "simcheap", "-link", "telegram=", "-enabled", "false"}, who...)...)
	p, err := marketstore.New(db.Pool, network.Nile).Provider(ctx, "simcheap")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "Sim Cheap" || len(p.Kinds) != 2 || p.Links.Site == nil || p.Links.Telegram != nil || p.Enabled {
		t.Fatalf("stored %+v", p)
	}
	if out := admin(0, "-list"); !strings.Contains(out, "simcheap") || !strings.Contains(out, "https://cheap.example") {
		t.Errorf("list: %s", out)
	}
	admin(0, append([]string{"-slug", "simcheap", "-delete"}, who...)...)
	admin(1, append([]string{"-slug", "simcheap", "-delete"}, who...)...)
}

// Two-person approval (docs/operations.md "Adjustments and two-person approval"): an
// adjustment above ADMIN_APPROVAL_ABOVE_SUN credits nothing until another operator, named
// by the environment, approves it; the requester cannot approve it; the audit rows carry
// both identities.
func TestAdminAdjustAboveThresholdNeedsASecondOperator(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("NETWORK", "nile")
	t.Setenv("DEPOSIT_HD_KEY", deposits.DevSeedHex)
	t.Setenv("ADMIN_APPROVAL_ABOVE_SUN", "100000000") // 100 TRX
	store, _ := accounts.New(db.Pool, accounts.Options{})
	owner, _ := tron.GenerateKey()
	acc, _, err := store.CreateOrGetByOwner(ctx, network.Nile, owner.Address(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	admin := func(as string, wantCode int, args ...string) string {
		t.Helper()
		t.Setenv("ADMIN_OPERATOR", as)
		var out bytes.Buffer
		code, err := run(ctx, args, &out)
		if code != wantCode {
			t.Fatalf("%s: admin %s: exit %d (%v), want %d; output:\n%s", as, strings.Join(args, " "), code, err, wantCode, out.String())
		}
		return out.String()
	}
	balance := func() int64 {
		var b int64
		_ = db.Pool.QueryRow(ctx, `SELECT coalesce((SELECT balance_sun FROM ledger_accounts WHERE account_id = $1), 0)`, acc.ID).Scan(&b)
		return b
	}
	// At the threshold one operator suffices.
	admin("alice", 0, "adjust", "-account", acc.ID, "-amount-sun", "100000000", "-ref", "T-small", "-reason", "refund")
	if b := balance(); b != 100_000_000 {
		t.Fatalf("balance %d after a small adjustment", b)
	}
	// Above it: pending, nothing credited; the requester cannot approve it.
	out := admin("alice", 0, "adjust", "-account", acc.ID, "-amount-sun", "1000000000000000", "-ref", "T-big", "-reason", "migration")
	if !strings.Contains(out, "pending") || balance() != 100_000_000 {
		t.Fatalf("large adjustment: %s, balance %d", out, balance())
	}
	if out := admin("bob", 0, "pending"); !strings.Contains(out, "T-big") || !strings.Contains(out, "support:alice") {
		t.Fatalf("pending: %s", out)
	}
	admin("alice", 1, "approve", "-ref", "T-big")
	admin("bob", 1, "approve", "-ref", "T-unknown")
	if balance() != 100_000_000 {
		t.Fatal("a refused approval credited")
	}
	out = admin("bob", 0, "approve", "-ref", "T-big")
	if !strings.Contains(out, "credited 1000000000000000") || balance() != 100_000_000+1_000_000_000_000_000 {
		t.Fatalf("approve: %s, balance %d", out, balance())
	}
	if out := admin("carol", 0, "approve", "-ref", "T-big"); !strings.Contains(out, "already approved") {
		t.Fatalf("second approval: %s", out)
	}
	var actor, requested, approved string
	if err := db.Pool.QueryRow(ctx, `SELECT actor, details->>'requested_by', details->>'approved_by' FROM audit_log
		WHERE action = 'ledger.adjustment' AND details->>'ref' = 'T-big'`).Scan(&actor, &requested, &approved); err != nil {
		t.Fatal(err)
	}
	if actor != "support:bob" || requested != "support:alice" || approved != "support:bob" {
		t.Fatalf("audit: actor %s, requested_by %s, approved_by %s", actor, requested, approved)
	}
	if v, err := ledgerstore.CheckPool(ctx, db.Pool, ledgerstore.CheckOptions{}); err != nil || len(v) > 0 {
		t.Fatalf("invariants: %v %v", v, err)
	}
}
