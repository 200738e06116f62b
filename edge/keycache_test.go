package edge

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"rental/infra/accounts"
	"rental/schemas/network"
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
