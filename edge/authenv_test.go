package edge

import (
	"net"
	"sync/atomic"

	"context"
	"crypto/rand"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"rental/schemas/apierr"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"rental/infra/accounts"
	"rental/infra/idempotency"
	"rental/infra/ratelimit"
	"rental/infra/reqsign"
	"rental/infra/reqsign/replay"
	"rental/infra/sigstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/network"
	"rental/schemas/scopes"
)

// authEnv is an edge with the real authentication stack: Postgres accounts and keys,
// Redis replay cache and budgets, idempotency records.
type authEnv struct {
	ts      *testServer
	db      *testenv.DB
	store   *accounts.Store
	keys    *KeyAuthenticator
	limiter *ratelimit.Limiter
	opts    authEnvOptions
	acct    accounts.Account
}

type authEnvOptions struct {
	maxKeys    int
	cacheTTL   time.Duration
	limits     RateLimits
	idemWait   time.Duration
	masterKey  []byte
	handlers   map[string]HandlerFunc
	extra      func(*Options)
	shareWith  *authEnv // second replica on the same database and Redis namespace
	redisPfx   string
	noLimiter  bool
	skipServer bool
	// durable records used signatures in Postgres too (infra/sigstore).
	durable bool
	// rdb replaces the shared test Redis (a private redis-server), keys without prefix.
	rdb *redis.Client
	// keyLookup wraps the key store the authenticator reads (a read counter); unknownKeys
	// bounds its negative cache.
	keyLookup   func(KeyLookup) KeyLookup
	unknownKeys int
}

var testMasterKey = []byte("0123456789abcdef0123456789abcdef")

// generous budgets so that tests of other concerns never meet a limit
var roomyLimits = RateLimits{Order: 1000, Read: 1000, Management: 1000,
	IP: redis_rate.Limit{Rate: 100000, Burst: 100000, Period: time.Second}}

func newAuthEnv(t testing.TB, o authEnvOptions) *authEnv {
	t.Helper()
	if o.masterKey == nil {
		o.masterKey = testMasterKey
	}
	if o.limits == (RateLimits{}) {
		o.limits = roomyLimits
	}
	env := &authEnv{opts: o}
	var rdb *redis.Client
	var prefix string
	if o.rdb != nil {
		rdb, prefix = o.rdb, "p:"
	} else {
		rdb, prefix = testenv.Redis(t)
	}
	if o.shareWith != nil {
		env.db = o.shareWith.db
		prefix = o.shareWith.opts.redisPfx
		env.acct = o.shareWith.acct
	} else {
		env.db = testenv.Postgres(t)
	}
	env.opts.redisPfx = prefix
	store, err := accounts.New(env.db.Pool, accounts.Options{MasterKey: o.masterKey, MaxActiveKeys: o.maxKeys})
	if err != nil {
		t.Fatal(err)
	}
	env.store = store
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var lookup KeyLookup = store
	if o.keyLookup != nil {
		lookup = o.keyLookup(store)
	}
	ko := KeyAuthOptions{
		Network: network.Nile, Keys: lookup, Replay: replay.New(rdb, prefix, 0), Logger: log, CacheTTL: o.cacheTTL, UnknownKeys: o.unknownKeys,
	}
	if o.durable {
		ko.Signatures = sigstore.New(env.db.Pool, 0)
	}
	env.keys, err = NewKeyAuthenticator(ko)
	if err != nil {
		t.Fatal(err)
	}
	if !o.noLimiter {
		env.limiter = ratelimit.New(rdb, prefix)
	}
	if o.shareWith == nil {
		env.acct = env.newAccount(t)
	}
	if o.skipServer {
		return env
	}
	idem := idempotency.New(env.db.Pool, idempotency.Options{Wait: o.idemWait})
	opts := []serverOpt{withOptions(func(op *Options) {
		op.Keys = env.keys
		op.Bootstrap = testBootstrap{}
		op.Limiter = env.limiter
		op.RateLimits = o.limits
		op.Accounts = store
		op.Idempotency = idem
		op.Brand = "tronrent"
		if o.extra != nil {
			o.extra(op)
		}
	})}
	for k, h := range o.handlers {
		opts = append(opts, withHandler(k, h))
	}
	env.ts = startServerTB(t, opts...)
	return env
}

func randomAddress(t testing.TB) tron.Address {
	var b [20]byte
	_, _ = rand.Read(b[:])
	a, err := tron.AddressFromBytes(b[:])
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (env *authEnv) newAccount(t testing.TB) accounts.Account {
	t.Helper()
	a, _, err := env.store.CreateOrGetByOwner(context.Background(), network.Nile, randomAddress(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// key creates a key on the env's account with the given scopes (all when none).
func (env *authEnv) key(t testing.TB, sc ...string) accounts.CreatedKey {
	t.Helper()
	return env.keyFor(t, env.acct.ID, accounts.NewKey{Scopes: sc})
}

func (env *authEnv) keyFor(t testing.TB, accountID string, nk accounts.NewKey) accounts.CreatedKey {
	t.Helper()
	if len(nk.Scopes) == 0 {
		nk.Scopes = scopes.All()
	}
	ck, err := env.store.CreateKey(context.Background(), accountID, nk, "test")
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// signed sends a request signed now with k; extra header pairs override the signed ones.
// Timestamps carry milliseconds, so two identical requests signed in the same millisecond
// have the same signature and the second is a replay (1009); signNow hands out strictly
// increasing milliseconds so tests that repeat a request make distinct signatures.
func (env *authEnv) signed(t *testing.T, k accounts.CreatedKey, method, target, body string, header ...string) response {
	t.Helper()
	return env.signedAt(t, k, signNow(), method, target, body, header...)
}

var lastSignMilli atomic.Int64

func signNow() time.Time {
	for {
		now := time.Now().UnixMilli()
		last := lastSignMilli.Load()
		if now <= last {
			now = last + 1
		}
		if lastSignMilli.CompareAndSwap(last, now) {
			return time.UnixMilli(now)
		}
	}
}

func (env *authEnv) signedAt(t *testing.T, k accounts.CreatedKey, at time.Time, method, target, body string, header ...string) response {
	t.Helper()
	h := reqsign.Headers(k.ID, k.Secret, at, method, target, []byte(body))
	hs := []string{reqsign.HeaderKey, h[reqsign.HeaderKey], reqsign.HeaderTimestamp, h[reqsign.HeaderTimestamp], reqsign.HeaderSign, h[reqsign.HeaderSign]}
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	return env.ts.do(t, method, target, ct, body, append(hs, header...)...)
}

// testBootstrap stands in for the signup package's bootstrap authenticator: the token
// "abt_<account id>" authenticates as that account, "abt_expired" is expired.
type testBootstrap struct{}

func (testBootstrap) Authenticate(_ context.Context, rc *fasthttp.RequestCtx) (*Principal, error) {
	v := string(rc.Request.Header.Peek("Authorization"))
	tok, ok := strings.CutPrefix(v, "Bearer abt_")
	if !ok {
		return nil, nil
	}
	if tok == "expired" {
		return nil, errBootstrapExpired
	}
	return &Principal{AccountID: tok, Wallet: "Ttest", AccountStatus: StatusUnfunded}, nil
}

var errBootstrapExpired = apierr.BootstrapTokenExpired.New("expired")

// startServerTB is startServer for tests and benchmarks alike.
func startServerTB(t testing.TB, opts ...serverOpt) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := Options{
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Registerer:    reg,
		Network:       network.Nile,
		Status:        fixedStatus{okReport()},
		ShutdownGrace: 5 * time.Second,
	}
	hs := map[string]HandlerFunc{}
	for _, f := range opts {
		f(&o, hs)
	}
	srv, err := newServer(o, hs)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{srv: srv, url: "http://" + ln.Addr().String(), reg: reg, stop: cancel, done: make(chan struct{})}
	go func() { ts.err = srv.Serve(ctx, ln); close(ts.done) }()
	t.Cleanup(func() {
		cancel()
		<-ts.done
	})
	return ts
}
