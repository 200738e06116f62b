package edge

import (
	"context"
	"testing"

	"rental/infra/acceptance"
	"rental/infra/sigstore"
	"rental/infra/testenv"
	"rental/schemas/scopes"
)

const keyBody = `{"scopes":["api_keys.read"],"label":"replayed"}`

// A signed write replayed after Redis lost the replay cache's keys (FLUSHALL) is still
// refused with 1009: the signature's record in Postgres outlives Redis.
func TestReplayRefusedAfterRedisFlush(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{durable: true})
	admin := env.key(t, scopes.APIKeysWrite, scopes.APIKeysRead)
	before := env.activeKeys(t)
	at := signNow()
	if r := env.signedAt(t, admin, at, "POST", "/v1/api-keys", keyBody); r.status != 201 {
		t.Fatalf("first use: HTTP %d %s", r.status, r.body)
	}
	// FLUSHALL, limited to this test's keys (the Redis is shared with other tests).
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, env.opts.redisPfx+"*", 1000).Iterator()
	n := 0
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
		n++
	}
	if n == 0 {
		t.Fatal("nothing flushed: the replay cache's key was not where the test looked")
	}
	wantError(t, env.signedAt(t, admin, at, "POST", "/v1/api-keys", keyBody), 401, 1009, "replayed_signature", nil)
	if got := env.activeKeys(t); got != before+1 {
		t.Fatalf("%d keys after the replay, want %d: the replay created a key", got, before+1)
	}
}

// Across a Redis restart without persistence a replay is refused (1009); while Redis is
// down, signed writes go on (rate budgets fail open, replay protection holds in Postgres)
// and a replay is still refused.
func TestReplayRefusedAcrossRedisRestart(t *testing.T) {
	pr := testenv.NewRedisServer(t)
	pr.Start(true)
	rdb := pr.Client()
	t.Cleanup(func() { rdb.Close() })
	env := newAuthEnv(t, authEnvOptions{durable: true, rdb: rdb})
	admin := env.key(t, scopes.APIKeysWrite, scopes.APIKeysRead)

	at := signNow()
	if r := env.signedAt(t, admin, at, "POST", "/v1/api-keys", keyBody); r.status != 201 {
		t.Fatalf("first use: HTTP %d %s", r.status, r.body)
	}
	pr.Stop()
	// Redis down: a fresh write is served, a replay refused.
	if r := env.signed(t, admin, "POST", "/v1/api-keys", keyBody); r.status != 201 {
		t.Fatalf("fresh write with Redis down: HTTP %d %s", r.status, r.body)
	}
	wantError(t, env.signedAt(t, admin, at, "POST", "/v1/api-keys", keyBody), 401, 1009, "replayed_signature", nil)

	pr.Start(true) // empty: no persistence
	wantError(t, env.signedAt(t, admin, at, "POST", "/v1/api-keys", keyBody), 401, 1009, "replayed_signature", nil)
	if r := env.signed(t, admin, "POST", "/v1/api-keys", keyBody); r.status != 201 {
		t.Fatalf("fresh write after the restart: HTTP %d %s", r.status, r.body)
	}
}

// An order's signature is recorded in the creation's transaction (the group commit's or
// the one-by-one's): replayed after the Redis replay cache lost its keys it is 1009, not
// the idempotent 200 replay, and nothing is charged twice.
func TestOrderReplayRefusedAfterRedisFlush(t *testing.T) {
	oe := newOrdersEnv(t, func(ao *acceptance.Options) { ao.Signatures = sigstore.New(ao.Ledger.Pool(), 0) })
	k := oe.key(t, scopes.OrdersWrite, scopes.OrdersRead)
	oe.fund(t, oe.acct.ID, 100_000_000)
	body := orderJSON(map[string]any{"client_order_id": "replay-0001", "resource": "energy", "amount": 65_000,
		"tier": "1h", "receiver": oe.activated.String()})
	at := signNow()
	if r := oe.signedAt(t, k, at, "POST", "/v1/orders", body); r.status != 201 {
		t.Fatalf("first use: HTTP %d %s", r.status, r.body)
	}
	rdb, _ := testenv.Redis(t)
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, oe.opts.redisPfx+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
	wantError(t, oe.signedAt(t, k, at, "POST", "/v1/orders", body), 401, 1009, "replayed_signature", nil)
	// A fresh signature of the same order is the idempotent replay (200).
	if r := oe.signed(t, k, "POST", "/v1/orders", body); r.status != 200 {
		t.Fatalf("fresh signature: HTTP %d %s", r.status, r.body)
	}
	if n := oe.count(t, `SELECT count(*) FROM orders WHERE account_id = $1`, oe.acct.ID); n != 1 {
		t.Fatalf("%d orders", n)
	}
}
