package edge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"rental/infra/accounts"
	"rental/infra/reqsign"
	"rental/schemas/network"
	"rental/schemas/scopes"
)

// keyStore counts reads (keys read) and queries, and answers the key with the scopes set last.
type keyStore struct {
	mu      sync.Mutex
	reads   int
	queries int
	scopes  []string
}

func (s *keyStore) KeyForAuth(_ context.Context, id string) (accounts.AuthKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries++
	return s.read(id), nil
}

func (s *keyStore) KeysForAuth(_ context.Context, ids []string) (map[string]accounts.AuthKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries++
	out := map[string]accounts.AuthKey{}
	for _, id := range ids {
		out[id] = s.read(id)
	}
	return out, nil
}

// read answers one key; s.mu is held.
func (s *keyStore) read(id string) accounts.AuthKey {
	s.reads++
	return accounts.AuthKey{Key: accounts.Key{ID: id, Scopes: append([]string(nil), s.scopes...)}}
}

func (s *keyStore) TouchKey(context.Context, string) error { return nil }

func (s *keyStore) set(scopes ...string) {
	s.mu.Lock()
	s.scopes = scopes
	s.mu.Unlock()
}

func (s *keyStore) count() int { s.mu.Lock(); defer s.mu.Unlock(); return s.reads }

type noReplay struct{}

func (noReplay) Remember(context.Context, string, []byte) (bool, error) { return true, nil }

func (noReplay) Entry(keyID string, _ []byte) (string, time.Duration) {
	return "noreplay:" + keyID, time.Second
}

// newKeyCache is a key authenticator with cache life ttl over a keyStore answering
// orders.read.
func newKeyCache(t *testing.T, ttl time.Duration) (*keyStore, *KeyAuthenticator) {
	return newKeyCacheWarm(t, ttl, -1)
}

// newKeyCacheWarm is newKeyCache with KeepWarm set (newKeyCache keeps no key warm, so that
// its tests count the reads requests cause alone).
func newKeyCacheWarm(t *testing.T, ttl, warm time.Duration) (*keyStore, *KeyAuthenticator) {
	t.Helper()
	store := &keyStore{scopes: []string{"orders.read"}}
	a, err := NewKeyAuthenticator(KeyAuthOptions{Network: network.Nile, Keys: store, Replay: noReplay{},
		Logger: slog.New(slog.DiscardHandler), CacheTTL: ttl, KeepWarm: warm})
	if err != nil {
		t.Fatal(err)
	}
	return store, a
}

// A key in use is read again in the background past half its cache life, so requests keep
// being served from the cache, with what the store says now; an entry nobody refreshed is
// never served past CacheTTL.
func TestKeyCacheRefreshesAheadAndNeverServesPastItsLife(t *testing.T) {
	const ttl = time.Second
	store, a := newKeyCache(t, ttl)
	ctx := context.Background()
	t0 := time.Now()
	scopesAt := func(at time.Time) []string {
		t.Helper()
		ck, err := a.lookup(ctx, "ak_test_x", at)
		if err != nil {
			t.Fatal(err)
		}
		return ck.key.Scopes
	}
	scopesAt(t0)
	if store.count() != 1 {
		t.Fatalf("%d reads for the first request", store.count())
	}
	store.set("orders.write")
	// Young entry: served, nothing read.
	if got := scopesAt(t0.Add(ttl / 4)); got[0] != "orders.read" || store.count() != 1 {
		t.Fatalf("young entry: scopes %v after %d reads", got, store.count())
	}
	// Past half its life: still served at once, and read again in the background.
	if got := scopesAt(t0.Add(ttl * 6 / 10)); got[0] != "orders.read" {
		t.Fatalf("half-life entry served %v", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for store.count() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no background refresh past half the entry's life")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The refreshed entry (stamped when the refresh was asked) is what the next requests
	// get, past the first entry's life, without another read.
	deadline = time.Now().Add(5 * time.Second)
	for {
		got := scopesAt(t0.Add(ttl * 105 / 100)) // younger than half its life: no refresh
		if got[0] == "orders.write" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refreshed entry not used: %v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if store.count() != 2 {
		t.Fatalf("%d reads, want the first and the background one", store.count())
	}
	// Nobody asked during the refreshed entry's second half: past its life it is read
	// again before it is served.
	store.set("account.read")
	if got := scopesAt(t0.Add(ttl*6/10 + ttl + time.Millisecond)); got[0] != "account.read" || store.count() != 3 {
		t.Fatalf("expired entry: scopes %v after %d reads", got, store.count())
	}
}

// Many keys in use are refreshed together: the keys past half their life within the
// gathering delay are read by one query, not one each.
func TestKeyCacheRefreshesManyKeysInOneRead(t *testing.T) {
	const ttl = time.Second
	store, a := newKeyCache(t, ttl)
	ctx := context.Background()
	t0 := time.Now()
	const n = 50
	for i := range n {
		if _, err := a.lookup(ctx, fmt.Sprintf("ak_test_%d", i), t0); err != nil {
			t.Fatal(err)
		}
	}
	store.set("orders.write")
	for i := range n {
		if _, err := a.lookup(ctx, fmt.Sprintf("ak_test_%d", i), t0.Add(ttl*6/10)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for store.count() < 2*n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d keys refreshed", store.count()-n, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	store.mu.Lock()
	queries := store.queries
	store.mu.Unlock()
	if queries != n+1 {
		t.Fatalf("%d queries: %d first reads and %d for the refresh, want 1", queries, n, queries-n)
	}
	for i := range n {
		ck, err := a.lookup(ctx, fmt.Sprintf("ak_test_%d", i), t0.Add(ttl*105/100))
		if err != nil || ck.key.Scopes[0] != "orders.write" {
			t.Fatalf("key %d after the refresh: %v %v", i, ck.key.Scopes, err)
		}
	}
}

// Keys requested within KeepWarm are read again every CacheTTL/2 in one query, so a key
// used less often than its cache life is still served from the cache, with what the store
// says now; a key no longer requested is dropped from the rounds.
func TestKeyCacheKeepsKeysInUseWarm(t *testing.T) {
	const ttl = 200 * time.Millisecond
	store, a := newKeyCacheWarm(t, ttl, 500*time.Millisecond)
	ctx := context.Background()
	const n = 20
	for i := range n {
		if _, err := a.lookup(ctx, fmt.Sprintf("ak_test_%d", i), time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	store.set("orders.write")
	// Several cache lives later, without a request in between, every key is served from the
	// cache with the new scopes.
	time.Sleep(3 * ttl)
	store.mu.Lock()
	queries, reads := store.queries, store.reads
	store.mu.Unlock()
	rounds := queries - n
	if rounds < 2 || reads != n+rounds*n {
		t.Fatalf("%d queries reading %d keys after %d first reads, want rounds of one query for all %d keys", queries, reads, n, n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for i := range n {
		for {
			before := store.count()
			ck, err := a.lookup(ctx, fmt.Sprintf("ak_test_%d", i), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if ck.key.Scopes[0] == "orders.write" && store.count() == before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %d: scopes %v; read by its request: %v", i, ck.key.Scopes, store.count() != before)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// Past KeepWarm without requests the rounds stop.
	time.Sleep(800 * time.Millisecond)
	c0 := store.count()
	time.Sleep(3 * ttl)
	if c := store.count(); c != c0 {
		t.Fatalf("%d keys read after no request for longer than KeepWarm", c-c0)
	}
}

// countingKeys counts the key reads that reach the store, per key id.
type countingKeys struct {
	KeyLookup
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingKeys) KeyForAuth(ctx context.Context, id string) (accounts.AuthKey, error) {
	c.count(id)
	return c.KeyLookup.KeyForAuth(ctx, id)
}

func (c *countingKeys) KeysForAuth(ctx context.Context, ids []string) (map[string]accounts.AuthKey, error) {
	for _, id := range ids {
		c.count(id)
	}
	return c.KeyLookup.KeysForAuth(ctx, ids)
}

func (c *countingKeys) count(id string) {
	c.mu.Lock()
	c.reads[id]++
	c.mu.Unlock()
}

// readsBut is the number of reads of ids other than except.
func (c *countingKeys) readsBut(except string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id, r := range c.reads {
		if id != except {
			n += r
		}
	}
	return n
}

// The review's amplification (docs/auth.md "Unknown key ids"): a flood of made-up key ids
// from one source over HTTP, against the real key store in Postgres. An id of the wrong
// form costs no read; a well-formed unknown id costs one read, remembered in the bounded
// negative cache (a repeat reads nothing) and never refreshed; the per-IP budget is
// charged before any read, so the reads stop with it. Memory stays bounded (the negative
// cache at its size, nothing else grows) and the real key in use stays cached.
func TestUnknownKeyIDFloodIsBounded(t *testing.T) {
	counter := &countingKeys{reads: map[string]int{}}
	const budget, negative = 30, 10
	env := newAuthEnv(t, authEnvOptions{cacheTTL: 10 * time.Second, unknownKeys: negative,
		keyLookup: func(k KeyLookup) KeyLookup { counter.KeyLookup = k; return counter },
		limits:    RateLimits{Order: 1000, Read: 1000, Management: 1000, IP: redis_rate.Limit{Rate: budget, Burst: budget, Period: time.Minute}},
		extra:     func(o *Options) { o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} }})
	real := env.key(t, scopes.AccountRead)
	realIP := []string{"X-Forwarded-For", "198.51.100.1"}
	if r := env.signed(t, real, "GET", "/v1/account", "", realIP...); r.status != 200 {
		t.Fatalf("real key: HTTP %d %s", r.status, r.body)
	}
	flood := func(id string) response {
		h := reqsign.Headers(id, "sk_test_made-up", signNow(), "GET", "/v1/account", nil)
		return env.ts.do(t, "GET", "/v1/account", "", "", reqsign.HeaderKey, id, reqsign.HeaderTimestamp, h[reqsign.HeaderTimestamp],
			reqsign.HeaderSign, h[reqsign.HeaderSign], "X-Forwarded-For", "203.0.113.7")
	}
	// Wrong forms: 8 KiB after the prefix, upper-case hex, one character short. No read.
	for _, id := range []string{"ak_test_" + strings.Repeat("a", 8<<10), "ak_test_" + strings.Repeat("A", 32), "ak_test_" + strings.Repeat("a", 31)} {
		wantError(t, flood(id), 401, 1002, "invalid_signature", reqsign.HeaderKey)
	}
	if n := counter.readsBut(real.ID); n != 0 {
		t.Fatalf("%d reads for ids of the wrong form", n)
	}
	// One well-formed unknown id asked five times: one read.
	same := "ak_test_" + strings.Repeat("0", 32)
	for range 5 {
		wantError(t, flood(same), 401, 1002, "invalid_signature", nil)
	}
	if n := counter.readsBut(real.ID); n != 1 {
		t.Fatalf("%d reads for one unknown id asked five times", n)
	}
	// Random ids until the per-IP budget refuses: then no further read.
	statuses := map[int]int{}
	for range 2 * budget {
		var b [16]byte
		_, _ = rand.Read(b[:])
		statuses[flood("ak_test_"+hex.EncodeToString(b[:])).status]++
	}
	reads := counter.readsBut(real.ID)
	if statuses[429] < budget || reads > budget {
		t.Fatalf("statuses %v, %d reads: want the budget of %d to stop the reads", statuses, reads, budget)
	}
	env.keys.mu.Lock()
	cached, inUse := len(env.keys.cache), len(env.keys.inUse)
	_, realCached := env.keys.cache[real.ID]
	env.keys.mu.Unlock()
	if n := env.keys.unknown.Len(); n > negative || cached != 1 || inUse != 1 || !realCached {
		t.Fatalf("after the flood: %d unknown ids (bound %d), %d cached keys, %d in use, real key cached %v", n, negative, cached, inUse, realCached)
	}
	if r := env.signed(t, real, "GET", "/v1/account", "", realIP...); r.status != 200 {
		t.Fatalf("real key after the flood: HTTP %d %s", r.status, r.body)
	}
}
