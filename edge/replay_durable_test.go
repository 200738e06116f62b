package edge

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// privateRedis starts a redis-server without persistence on a free loopback port; stop
// kills it (the test's own process, by PID) and start runs it again on the same port,
// empty, like a restart of a Redis without persistence.
type privateRedis struct {
	t    *testing.T
	port int
	cmd  *exec.Cmd
}

func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is needed for the Redis restart test: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p := &privateRedis{t: t, port: port}
	p.cmd = exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *privateRedis) start() {
	p.t.Helper()
	if p.cmd.Process != nil {
		p.cmd = exec.Command(p.cmd.Path, p.cmd.Args[1:]...)
	}
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	c := p.client()
	defer c.Close()
	for i := 0; ; i++ {
		if c.Ping(context.Background()).Err() == nil {
			return
		}
		if i > 100 {
			p.t.Fatal("private redis-server did not answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *privateRedis) stop() {
	if p.cmd.Process != nil && p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

func (p *privateRedis) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p.port), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
}

// Across a Redis restart without persistence a replay is refused (1009); while Redis is
// down, signed writes go on (rate budgets fail open, replay protection holds in Postgres)
// and a replay is still refused.
func TestReplayRefusedAcrossRedisRestart(t *testing.T) {
	pr := startPrivateRedis(t)
	rdb := pr.client()
	t.Cleanup(func() { rdb.Close() })
	env := newAuthEnv(t, authEnvOptions{durable: true, rdb: rdb})
	admin := env.key(t, scopes.APIKeysWrite, scopes.APIKeysRead)

	at := signNow()
	if r := env.signedAt(t, admin, at, "POST", "/v1/api-keys", keyBody); r.status != 201 {
		t.Fatalf("first use: HTTP %d %s", r.status, r.body)
	}
	pr.stop()
	// Redis down: a fresh write is served, a replay refused.
	if r := env.signed(t, admin, "POST", "/v1/api-keys", keyBody); r.status != 201 {
		t.Fatalf("fresh write with Redis down: HTTP %d %s", r.status, r.body)
	}
	wantError(t, env.signedAt(t, admin, at, "POST", "/v1/api-keys", keyBody), 401, 1009, "replayed_signature", nil)

	pr.start() // empty: no persistence
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
