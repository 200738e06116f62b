package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/accounts"
	"rental/infra/deposits"
	"rental/infra/kafka"
	"rental/infra/orderstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/webhooks"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
	"rental/schemas/scopes"
	"rental/schemas/topics"
)

var (
	oldMaster = bytes.Repeat([]byte{1}, 32)
	newMaster = bytes.Repeat([]byte{2}, 32)
)

// opsEnv is a database with one account holding a key and a webhook endpoint, both sealed
// under oldMaster, and the admin tool's environment pointing at it.
type opsEnv struct {
	t    *testing.T
	db   *testenv.DB
	acc  string
	key  accounts.CreatedKey
	hook webhooks.Target
}

func newOpsEnv(t *testing.T) *opsEnv {
	ctx := context.Background()
	db := testenv.Postgres(t)
	t.Setenv("DATABASE_URL", db.URL)
	t.Setenv("ADMIN_OPERATOR", "alice")
	t.Setenv("NETWORK", "nile")
	t.Setenv("DEPOSIT_HD_KEY", deposits.DevSeedHex)
	t.Setenv("API_KEY_MASTER_KEY", hex.EncodeToString(oldMaster))
	store, err := accounts.New(db.Pool, accounts.Options{MasterKey: oldMaster})
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := tron.GenerateKey()
	acc, _, err := store.CreateOrGetByOwner(ctx, network.Nile, owner.Address(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := store.CreateKey(ctx, acc.ID, accounts.NewKey{Scopes: []string{scopes.OrdersWrite}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := webhooks.NewStore(db.Pool, oldMaster)
	if err != nil {
		t.Fatal(err)
	}
	var hook webhooks.Target
	if err := hs.InTx(ctx, func(tx pgx.Tx) error {
		hook, err = hs.Create(ctx, tx, acc.ID, webhooks.NewEndpoint{URL: "https://example.com/hook", Role: webhooks.RolePrimary})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return &opsEnv{t: t, db: db, acc: acc.ID, key: key, hook: hook}
}

func (e *opsEnv) admin(wantCode int, args ...string) string {
	e.t.Helper()
	var out bytes.Buffer
	code, err := run(context.Background(), args, &out)
	if code != wantCode {
		e.t.Fatalf("admin %s: exit %d (%v), want %d; output:\n%s", strings.Join(args, " "), code, err, wantCode, out.String())
	}
	return out.String()
}

func (e *opsEnv) audit(action string) []accounts.AuditEntry {
	e.t.Helper()
	store, _ := accounts.New(e.db.Pool, accounts.Options{})
	all, err := store.Audit(context.Background(), e.acc, 50)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []accounts.AuditEntry
	for _, a := range all {
		if a.Action == action {
			out = append(out, a)
		}
	}
	return out
}

// Support looks up an account and an order; the account view lists the key but never its
// secret, and its deposit address.
func TestAccountAndOrderLookup(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	e.admin(0, "rotate-address", "-account", e.acc, "-reason", "issue one")
	out := e.admin(0, "account", "-account", e.acc)
	var view struct {
		Account  struct{ ID, Status string }
		Balances map[string]int64
		APIKeys  []struct{ ID string } `json:"api_keys"`
		Deposit  []any                 `json:"deposit_addresses"`
	}
	if err := json.Unmarshal([]byte(out), &view); err != nil {
		t.Fatalf("account output is not JSON: %v\n%s", err, out)
	}
	if view.Account.ID != e.acc || view.Account.Status == "" || len(view.APIKeys) != 1 || view.APIKeys[0].ID != e.key.ID || len(view.Deposit) == 0 {
		t.Errorf("account view: %+v", view)
	}
	if _, ok := view.Balances["available_sun"]; !ok {
		t.Errorf("no balances: %s", out)
	}
	if strings.Contains(out, e.key.Secret) || strings.Contains(out, e.hook.Secret) {
		t.Fatal("the account view shows a secret")
	}
	e.admin(1, "account", "-account", "acc_missing")
	e.admin(2, "account")

	var id string
	if err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
		tier, secs := "1h", int64(3600)
		r, err := orderstore.Insert(ctx, tx, orderstore.NewOrder{ID: orderstore.NewID(), AccountID: e.acc, Network: network.Nile,
			ClientOrderID: "c-1", Resource: orders.Energy, Amount: 100_000, Tier: &tier, DurationSeconds: &secs,
			Receiver: "TRecv", UnitPriceCenti: 6000, EnergyAmountSun: 6_000_000, CreatedAt: time.Now()})
		id = r.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO signed_txs (txid, order_id, purpose, signer, tx, expiration, state)
		VALUES ('aa11', $1, 'delegate', 'TPool', '{}', now(), 'broadcast')`, id); err != nil {
		t.Fatal(err)
	}
	out = e.admin(0, "order", "-order", id)
	var ov struct {
		Order   map[string]any
		Fills   []any
		Journal []struct{ TxID, Purpose, State string }
	}
	if err := json.Unmarshal([]byte(out), &ov); err != nil {
		t.Fatalf("order output is not JSON: %v\n%s", err, out)
	}
	if len(ov.Journal) != 1 || ov.Journal[0].TxID != "aa11" || ov.Journal[0].State != "broadcast" || !strings.Contains(out, id) {
		t.Errorf("order view:\n%s", out)
	}
	e.admin(1, "order", "-order", "ord_missing")
}

// Support revokes a key: audited with actor and reason, the key no longer authenticates
// as active, and a second revoke changes nothing.
func TestRevokeKeyAsSupport(t *testing.T) {
	e := newOpsEnv(t)
	e.admin(2, "revoke-key", "-key", e.key.ID) // no reason
	if out := e.admin(0, "revoke-key", "-key", e.key.ID, "-reason", "leaked in a ticket"); !strings.Contains(out, "revoked") {
		t.Errorf("revoke: %s", out)
	}
	if out := e.admin(0, "revoke-key", "-key", e.key.ID, "-reason", "again"); !strings.Contains(out, "already revoked") {
		t.Errorf("second revoke: %s", out)
	}
	e.admin(1, "revoke-key", "-key", "ak_missing", "-reason", "x")
	store, _ := accounts.New(e.db.Pool, accounts.Options{MasterKey: oldMaster})
	k, err := store.KeyForAuth(context.Background(), e.key.ID)
	if err != nil || k.RevokedAt == nil {
		t.Fatalf("key after revoke: %+v, %v", k.Key, err)
	}
	rows := e.audit("api_key.revoke")
	if len(rows) != 1 || rows[0].Actor != "support:alice" || rows[0].Details["reason"] != "leaked in a ticket" {
		t.Errorf("audit rows %+v", rows)
	}
}

// Rotating the master key re-encrypts every API key and endpoint secret: they open under
// the new key only, with the same plaintext; the old key is never printed; a second run
// changes nothing; a wrong old key changes nothing.
func TestRotateMasterKey(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	t.Setenv("API_KEY_MASTER_KEY", hex.EncodeToString(newMaster))
	wrong := filepath.Join(t.TempDir(), "wrong")
	_ = os.WriteFile(wrong, []byte(hex.EncodeToString(bytes.Repeat([]byte{3}, 32))), 0o600)
	who := []string{"-reason", "yearly rotation"}
	e.admin(2, append([]string{"rotate-master-key"}, who...)...) // no old key given
	if out := e.admin(1, append([]string{"rotate-master-key", "-old-key-file", wrong}, who...)...); strings.Contains(out, "re-encrypted") {
		t.Errorf("a wrong old key rotated: %s", out)
	}
	t.Setenv("API_KEY_MASTER_KEY_OLD", hex.EncodeToString(oldMaster))
	out := e.admin(0, append([]string{"rotate-master-key"}, who...)...)
	if !strings.Contains(out, "1 API key secrets and 1 webhook endpoint secrets") {
		t.Errorf("rotate: %s", out)
	}
	if strings.Contains(out, hex.EncodeToString(oldMaster)) || strings.Contains(out, hex.EncodeToString(newMaster)) {
		t.Fatal("a master key was printed")
	}
	if out := e.admin(0, append([]string{"rotate-master-key"}, who...)...); !strings.Contains(out, "0 API key secrets and 0 webhook") {
		t.Errorf("second rotation: %s", out)
	}

	newStore, _ := accounts.New(e.db.Pool, accounts.Options{MasterKey: newMaster})
	k, err := newStore.KeyForAuth(ctx, e.key.ID)
	if err != nil || string(k.Secret) != e.key.Secret {
		t.Fatalf("key under the new master key: %v", err)
	}
	oldStore, _ := accounts.New(e.db.Pool, accounts.Options{MasterKey: oldMaster})
	if _, err := oldStore.KeyForAuth(ctx, e.key.ID); err == nil {
		t.Error("the key still opens under the old master key")
	}
	hs, _ := webhooks.NewStore(e.db.Pool, newMaster)
	tg, err := hs.GetTarget(ctx, e.acc, e.hook.ID)
	if err != nil || tg.Secret != e.hook.Secret {
		t.Fatalf("endpoint under the new master key: %v", err)
	}
	if rows := e.audit("master_key.rotate"); len(rows) != 1 || rows[0].Actor != "support:alice" || rows[0].Details["reason"] != "yearly rotation" {
		t.Errorf("audit rows %+v", rows)
	}
}

// Dead-lettered webhooks are queued for delivery again, each at most once, audited; a dry
// run changes nothing.
func TestReplayWebhookDeadLetters(t *testing.T) {
	e := newOpsEnv(t)
	ctx := context.Background()
	broker := testenv.Kafka(t, testenv.SyntheticPayloads) // hand-made dead letters: the replay, not their shape, is tested
	t.Setenv("KAFKA_BROKERS", broker)
	cl, err := kafka.NewClient([]string{broker})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var ids []string
	for i := range 3 {
		env, err := events.New("order.confirmed", e.acc, network.Nile, map[string]any{"order_id": "ord_" + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(env)
		ids = append(ids, env.EventID)
		r := &kgo.Record{Topic: topics.WebhookDead.Name, Key: []byte("ord_x"), Value: b, Headers: []kgo.RecordHeader{
			{Key: "event_id", Value: []byte(env.EventID)}, {Key: "account_id", Value: []byte(e.acc)},
			{Key: "role", Value: []byte("primary")}, {Key: "attempts", Value: []byte("10")}, {Key: "reason", Value: []byte("exhausted")}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	queued := func() []string {
		rows, _ := e.db.Pool.Query(ctx, `SELECT event_id FROM webhook_queue ORDER BY seq`)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	if out := e.admin(0, "replay-webhooks", "-dry-run"); strings.Count(out, "would replay") != 3 || len(queued()) != 0 {
		t.Errorf("dry run: %s (queue %v)", out, queued())
	}
	e.admin(2, "replay-webhooks") // no reason
	out := e.admin(0, "replay-webhooks", "-event", ids[1], "-reason", "endpoint fixed")
	if got := queued(); len(got) != 1 || got[0] != ids[1] || !strings.Contains(out, "1 replayed") {
		t.Fatalf("replay of one event: %s (queue %v)", out, got)
	}
	out = e.admin(0, "replay-webhooks", "-account", e.acc, "-reason", "endpoint fixed")
	if got := queued(); len(got) != 3 || !strings.Contains(out, "2 replayed, 1 replayed before") {
		t.Fatalf("replay of the account: %s (queue %v)", out, got)
	}
	// The queue drains (delivered); a replay run again sends nothing twice.
	if _, err := e.db.Pool.Exec(ctx, `DELETE FROM webhook_queue`); err != nil {
		t.Fatal(err)
	}
	if out := e.admin(0, "replay-webhooks", "-reason", "again"); !strings.Contains(out, "0 replayed, 3 replayed before") || len(queued()) != 0 {
		t.Errorf("second replay: %s (queue %v)", out, queued())
	}
	if rows := e.audit("webhook.replay"); len(rows) != 3 || rows[0].Actor != "support:alice" || rows[0].Details["reason"] != "endpoint fixed" {
		t.Errorf("audit rows %+v", rows)
	}
}
