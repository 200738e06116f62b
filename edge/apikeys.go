package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"
	"golang.org/x/sync/singleflight"

	"rental/infra/accounts"
	"rental/infra/reqsign"
	"rental/infra/sigstore"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/scopes"
)

// ---- Key authentication --------------------------------------------------------------

// KeyLookup reads keys for verification (*accounts.Store implements it).
type KeyLookup interface {
	KeyForAuth(ctx context.Context, keyID string) (accounts.AuthKey, error)
	// KeysForAuth reads several keys at once (the background refresh); a key missing
	// from the answer does not exist.
	KeysForAuth(ctx context.Context, keyIDs []string) (map[string]accounts.AuthKey, error)
	TouchKey(ctx context.Context, keyID string) error
}

// ReplayCache remembers used signatures (infra/reqsign/replay implements it).
type ReplayCache interface {
	Remember(ctx context.Context, keyID string, sum []byte) (first bool, err error)
	// Entry is the Redis key Remember sets (SET NX) and its life, so that the dispatcher
	// can set it in the same round trip as the credential's budget.
	Entry(keyID string, sum []byte) (key string, ttl time.Duration)
}

// SignatureRecorder records a signature's use durably: sigstore.ErrUsed when it was
// recorded before (infra/sigstore implements it).
type SignatureRecorder interface {
	Record(ctx context.Context, sig sigstore.Sig) error
}

// KeyAuthOptions configure NewKeyAuthenticator.
type KeyAuthOptions struct {
	Network network.Network // the host's environment: its key prefix is the only one accepted
	Keys    KeyLookup       // required
	Replay  ReplayCache     // required
	// Signatures is the durable record of used signatures (infra/sigstore). With it a
	// signed write is refused with 1009 even after Redis lost the replay cache's keys,
	// and a Redis outage does not stop signed writes; without it a write whose replay
	// check cannot reach Redis is refused with 9003 (docs/auth.md "Replay protection").
	Signatures SignatureRecorder
	Logger     *slog.Logger // required
	// CacheTTL bounds how long a key read from Postgres is reused by this replica (default
	// 2 s, at most 10 s). It is the bound on how late a revocation, deactivation, allowlist
	// or account status change takes effect on every replica.
	CacheTTL time.Duration
	// KeepWarm is how long after its last request a key is still read again every
	// CacheTTL/2 with the other keys in use, in one query (default 30 s; negative: never,
	// a key is then read again only when a request finds its entry past half its life).
	// With many keys each used every few seconds, entries would otherwise expire between
	// requests and nearly every request would read its key from Postgres.
	KeepWarm time.Duration
	// UnknownKeys bounds the negative cache: key ids of the right form that do not exist,
	// each remembered for CacheTTL and never read again in the background (default 10,000;
	// the least recently asked is forgotten first). A flood of made-up ids costs at most
	// one Postgres read per id per CacheTTL, charged to the per-IP budget before it, and
	// neither grows memory past this bound nor evicts real keys (docs/auth.md "Unknown key
	// ids").
	UnknownKeys int
	Now         func() time.Time // clock; tests only
}

// KeyAuthenticator verifies X-API-KEY / X-API-TIMESTAMP / X-API-SIGN (rental-api-v1
// "Request signing"). Checks run in this order, each with its code:
//
//  1. any of the three headers absent: 1001 (all three absent: not this credential);
//  2. key id prefix of the other environment: 1012; not exactly this environment's prefix
//     and 32 lowercase hex characters: 1002 (no lookup);
//  3. timestamp not ISO 8601: 1002; off by more than 5 s: 1003 with details.server_time;
//  4. signature not base64 of 32 bytes: 1002;
//  5. key unknown: 1002 (an unknown id is not revealed as such); signature differs: 1002;
//  6. only then, because they reveal key state to a holder of the secret alone: revoked,
//     expired or of a closed account: 1006; inactive: 1007; IP not allowed: 1004;
//  7. signature already used: 1009 (Redis SET NX, every replica; for writes also the
//     durable record of infra/sigstore, which outlives a Redis loss).
//
// 1005 (scope) and 1008 (suspended account on writes) are the dispatcher's (auth.go).
type KeyAuthenticator struct {
	o     KeyAuthOptions
	other string // the other environment's key prefix

	mu    sync.Mutex
	cache map[string]cachedKey // keys that exist (revoked and inactive ones included)
	// unknown are ids read and not found, with the time of that read (bounded LRU, its
	// own lock); they are never refreshed nor kept warm.
	unknown *lru.Cache[string, time.Time]
	group   singleflight.Group
	// due are the keys to read again in the background (with the time of the request
	// that asked); one read takes them all, refreshGather after the first.
	due      map[string]time.Time
	flushing bool
	// inUse is each key's last request, for KeepWarm; warming is whether its round is
	// scheduled.
	inUse   map[string]time.Time
	warming bool

	touchMu sync.Mutex
	touched map[string]time.Time
}

type cachedKey struct {
	key    accounts.AuthKey
	scopes map[string]bool
	err    error // accounts.ErrNotFound is cached too
	at     time.Time
}

const maxKeyCache = 100_000

// NewKeyAuthenticator returns the key authenticator for Options.Keys.
func NewKeyAuthenticator(o KeyAuthOptions) (*KeyAuthenticator, error) {
	if o.Keys == nil || o.Replay == nil || o.Logger == nil {
		return nil, errors.New("edge: KeyAuthOptions needs Keys, Replay and Logger")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, err
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = 2 * time.Second
	}
	o.CacheTTL = min(o.CacheTTL, 10*time.Second)
	if o.KeepWarm == 0 {
		o.KeepWarm = 30 * time.Second
	}
	if o.UnknownKeys <= 0 {
		o.UnknownKeys = 10_000
	}
	unknown, err := lru.New[string, time.Time](o.UnknownKeys)
	if err != nil {
		return nil, err
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	other := network.Mainnet
	if o.Network == network.Mainnet {
		other = network.Nile
	}
	return &KeyAuthenticator{o: o, other: other.KeyIDPrefix(), cache: map[string]cachedKey{}, unknown: unknown, touched: map[string]time.Time{},
		due: map[string]time.Time{}, inUse: map[string]time.Time{}}, nil
}

// Authenticate implements Authenticator.
func (a *KeyAuthenticator) Authenticate(ctx context.Context, rc *fasthttp.RequestCtx) (*Principal, error) {
	h := &rc.Request.Header
	kid, ts, sig := h.Peek(reqsign.HeaderKey), h.Peek(reqsign.HeaderTimestamp), h.Peek(reqsign.HeaderSign)
	if len(kid) == 0 && len(ts) == 0 && len(sig) == 0 {
		return nil, nil
	}
	var missing []string
	for _, x := range []struct {
		name string
		v    []byte
	}{{reqsign.HeaderKey, kid}, {reqsign.HeaderTimestamp, ts}, {reqsign.HeaderSign, sig}} {
		if len(x.v) == 0 {
			missing = append(missing, x.name)
		}
	}
	if len(missing) > 0 {
		return nil, apierr.MissingCredentials.New("signed requests need X-API-KEY, X-API-TIMESTAMP and X-API-SIGN; missing "+strings.Join(missing, ", ")).
			WithField(missing[0]).With("missing", missing)
	}
	keyID := string(kid)
	if !strings.HasPrefix(keyID, a.o.Network.KeyIDPrefix()) {
		if strings.HasPrefix(keyID, a.other) {
			return nil, apierr.KeyEnvironmentMismatch.Newf("this host serves %s and takes %s... keys", a.o.Network, a.o.Network.KeyIDPrefix())
		}
		return nil, apierr.InvalidSignature.New("X-API-KEY is not a key id of this service").WithField(reqsign.HeaderKey)
	}
	if !accounts.ValidKeyID(a.o.Network, keyID) {
		// Checked before any lookup or cache entry: only an id that could exist costs one.
		return nil, apierr.InvalidSignature.New("X-API-KEY is not a key id of this service").WithField(reqsign.HeaderKey)
	}
	t, err := reqsign.ParseTimestamp(string(ts))
	if err != nil {
		return nil, apierr.InvalidSignature.New(err.Error()).WithField(reqsign.HeaderTimestamp)
	}
	now := a.o.Now()
	if d := now.Sub(t); d > reqsign.MaxSkew || d < -reqsign.MaxSkew {
		return nil, apierr.SignatureTimestampSkew.Newf("X-API-TIMESTAMP is %s off the server clock; the limit is 5 s", d.Round(time.Millisecond).Abs()).
			WithField(reqsign.HeaderTimestamp).With("server_time", events.FormatTime(now))
	}
	sum, ok := reqsign.DecodeSign(sig)
	if !ok {
		return nil, apierr.InvalidSignature.New("X-API-SIGN is not the base64 of an HMAC-SHA256").WithField(reqsign.HeaderSign)
	}
	ck, err := a.lookup(ctx, keyID, now)
	if errors.Is(err, accounts.ErrNotFound) {
		return nil, apierr.InvalidSignature.New("signature does not verify")
	}
	if err != nil {
		return nil, err
	}
	buf := canonicalPool.Get().(*[]byte)
	c := reqsign.Canonical((*buf)[:0], string(ts), string(rc.Method()), requestTarget(rc), rc.Request.Body())
	ok = reqsign.Equal(reqsign.Sum(ck.key.Secret, c), sum)
	*buf = c
	canonicalPool.Put(buf)
	if !ok {
		return nil, apierr.InvalidSignature.New("signature does not verify")
	}
	k := ck.key
	switch {
	case k.RevokedAt != nil:
		return nil, apierr.KeyRevoked.New("the key was revoked")
	case k.Expired(now):
		return nil, apierr.KeyRevoked.New("the key expired at " + events.FormatTime(*k.ExpiresAt))
	case k.AccountStatus == accounts.StatusClosed:
		return nil, apierr.KeyRevoked.New("the account is closed")
	case !k.IsActive:
		return nil, apierr.KeyInactive.New("the key is deactivated; reactivate it with PATCH /v1/api-keys/{id}")
	}
	if ip := ClientIP(rc); !k.AllowsIP(ip) {
		return nil, apierr.IPNotAllowed.New("source address not in the key's allowlist").With("source_ip", ip.String())
	}
	// Step 7 is left to the dispatcher (pendingReplay), which makes it together with the
	// key's rate budget in one Redis round trip; every path of dispatch makes it before
	// anything else can answer.
	a.touch(keyID, now)
	return &Principal{AccountID: k.AccountID, KeyID: keyID, Key: &k.Key, Scopes: ck.scopes, AccountStatus: k.AccountStatus,
		replay: &pendingReplay{cache: a.o.Replay, durable: a.o.Signatures, log: a.o.Logger, keyID: keyID, sum: sum,
			write: unsafeMethod(rc.Method())}}, nil
}

// pendingReplay is step 7 of a signed request not made yet: the signature's single use
// (1009), checked once per request by the dispatcher, alone (check) or inside the rate
// budget's round trip (ratelimit.Limiter.WindowOnce, then outcome), and for writes
// recorded durably (record, or the write's own transaction: Endpoint.SignatureInTx).
type pendingReplay struct {
	cache   ReplayCache
	durable SignatureRecorder // nil: Redis alone
	log     *slog.Logger
	keyID   string
	sum     []byte
	write   bool // the method changes something: fail closed without any record
}

// check records the signature's use alone.
func (r *pendingReplay) check(ctx context.Context) error {
	first, err := r.cache.Remember(ctx, r.keyID, r.sum)
	return r.outcome(first, err)
}

// outcome answers the request from the Redis record of its signature's use: first, or
// the error of the cache.
func (r *pendingReplay) outcome(first bool, err error) error {
	switch {
	case err != nil && r.write && r.durable == nil:
		// Fail closed on writes: without any record a captured write could be replayed
		// within the skew window. Nothing was done: 9003, retry later.
		return apierr.DependencyUnavailable.Wrap(err, "the replay cache is unavailable; nothing was done").WithRetryAfter(1)
	case err != nil:
		// Reads fail open (replaying a read changes nothing); writes are guarded by the
		// durable record (record), made before or with the write.
	case !first:
		return apierr.ReplayedSignature.New("this signature was already used; sign each attempt with a fresh timestamp")
	}
	return nil
}

// record makes a write's durable record before the write runs: 1009 when the signature
// was recorded before, 9003 when Postgres does not answer (nothing was done).
func (r *pendingReplay) record(ctx context.Context) error {
	if !r.write || r.durable == nil {
		return nil
	}
	switch err := r.durable.Record(ctx, r.sig()); {
	case errors.Is(err, sigstore.ErrUsed):
		return apierr.ReplayedSignature.New("this signature was already used; sign each attempt with a fresh timestamp")
	case err != nil:
		return apierr.DependencyUnavailable.Wrap(err, "the signature record is unavailable; nothing was done").WithRetryAfter(1)
	}
	return nil
}

func (r *pendingReplay) sig() sigstore.Sig { return sigstore.Sig{KeyID: r.keyID, Sum: r.sum} }

var canonicalPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// requestTarget is the path and query exactly as on the wire. An absolute-form target
// (http://host/path?q, legal but rare) is reduced to its path and query.
func requestTarget(rc *fasthttp.RequestCtx) string {
	u := rc.Request.Header.RequestURI()
	if len(u) > 0 && u[0] != '/' {
		if i := bytes.Index(u, []byte("://")); i >= 0 {
			rest := u[i+3:]
			if j := bytes.IndexByte(rest, '/'); j >= 0 {
				return string(rest[j:])
			}
			return "/"
		}
	}
	return string(u)
}

// lookup returns the key from the in-process cache when younger than CacheTTL, else
// from the store (one read per key at a time, however many requests wait for it). An id
// read and not found is answered from the negative cache for CacheTTL. Only keys that
// exist are marked in use (kept warm) and refreshed in the background.
func (a *KeyAuthenticator) lookup(ctx context.Context, keyID string, now time.Time) (cachedKey, error) {
	a.mu.Lock()
	ck, ok := a.cache[keyID]
	if ok {
		a.markInUse(keyID, now)
	}
	a.mu.Unlock()
	if age := now.Sub(ck.at); ok && age < a.o.CacheTTL {
		// Past half its life the entry is refreshed in the background, so a key in use is
		// read again before it expires and its requests never wait for Postgres; an entry
		// is still never served older than CacheTTL (a revocation takes effect within it).
		if age >= a.o.CacheTTL/2 {
			a.refreshLater(keyID, now)
		}
		return ck, nil
	}
	if at, ok := a.unknown.Get(keyID); ok && now.Sub(at) < a.o.CacheTTL {
		return cachedKey{}, accounts.ErrNotFound
	}
	v, err, _ := a.group.Do(keyID, func() (any, error) { return a.fetch(context.WithoutCancel(ctx), keyID, now) })
	if err != nil {
		return cachedKey{}, err
	}
	ck = v.(cachedKey)
	if ck.err == nil {
		a.mu.Lock()
		a.markInUse(keyID, now)
		a.mu.Unlock()
	}
	return ck, ck.err
}

// refreshTimeout bounds a background refresh, which no request waits for.
const refreshTimeout = 5 * time.Second

// refreshGather is how long the background refresh waits for more keys before it reads
// them: with many keys in use, one query refreshes dozens instead of one each.
const refreshGather = 50 * time.Millisecond

// refreshLater queues keyID for the next background read.
func (a *KeyAuthenticator) refreshLater(keyID string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, queued := a.due[keyID]; queued {
		return
	}
	a.due[keyID] = now
	if !a.flushing {
		a.flushing = true
		time.AfterFunc(refreshGather, a.refreshDue)
	}
}

// markInUse records a request for keyID and schedules the keep-warm round (a.mu held).
func (a *KeyAuthenticator) markInUse(keyID string, now time.Time) {
	if a.o.KeepWarm < 0 {
		return
	}
	if len(a.inUse) >= maxKeyCache {
		clear(a.inUse)
	}
	a.inUse[keyID] = now
	if !a.warming {
		a.warming = true
		time.AfterFunc(a.o.CacheTTL/2, a.keepWarm)
	}
}

// keepWarm queues for the background read every key requested within KeepWarm, forgets
// the others, and schedules the next round while any key is in use. An entry read this
// way is stamped with the time it was queued, so it is never served older than CacheTTL
// whatever the refresh does.
func (a *KeyAuthenticator) keepWarm() {
	now := a.o.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	queued := false
	for id, last := range a.inUse {
		if now.Sub(last) > a.o.KeepWarm {
			delete(a.inUse, id)
			continue
		}
		if _, ok := a.due[id]; !ok {
			a.due[id] = now
			queued = true
		}
	}
	if queued && !a.flushing {
		a.flushing = true
		time.AfterFunc(refreshGather, a.refreshDue)
	}
	if a.warming = len(a.inUse) > 0; a.warming {
		time.AfterFunc(a.o.CacheTTL/2, a.keepWarm)
	}
}

// refreshDue reads every queued key in one query and caches the answers, each stamped
// with the time of the request that queued it. A failed read changes nothing: the
// entries expire and their next request reads the key itself.
func (a *KeyAuthenticator) refreshDue() {
	a.mu.Lock()
	due := a.due
	a.due, a.flushing = make(map[string]time.Time, len(due)), false
	a.mu.Unlock()
	ids := make([]string, 0, len(due))
	for id := range due {
		ids = append(ids, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), refreshTimeout)
	defer cancel()
	keys, err := a.o.Keys.KeysForAuth(ctx, ids)
	if err != nil {
		a.o.Logger.Warn("edge: background refresh of API keys failed; they are read on use once expired", "keys", len(ids), "err", err)
		return
	}
	for _, id := range ids {
		k, ok := keys[id]
		var kerr error
		if !ok {
			kerr = accounts.ErrNotFound
		}
		a.store(id, k, kerr, due[id])
	}
}

// fetch reads the key from Postgres and caches the answer (a missing key too), stamped
// with now, the time of the request that asked.
func (a *KeyAuthenticator) fetch(ctx context.Context, keyID string, now time.Time) (any, error) {
	k, err := a.o.Keys.KeyForAuth(ctx, keyID)
	if err != nil && !errors.Is(err, accounts.ErrNotFound) {
		return nil, err // not cached: the next request tries again
	}
	return a.store(keyID, k, err, now), nil
}

// store caches a read of keyID (found, or accounts.ErrNotFound) stamped with now: a key
// in the cache of keys, an unknown id in the negative cache only.
func (a *KeyAuthenticator) store(keyID string, k accounts.AuthKey, err error, now time.Time) cachedKey {
	ck := cachedKey{key: k, err: err, at: now}
	if err != nil {
		a.unknown.Add(keyID, now)
		a.mu.Lock()
		delete(a.cache, keyID) // deleted since it was read
		a.mu.Unlock()
		return ck
	}
	ck.scopes = make(map[string]bool, len(k.Scopes))
	for _, s := range k.Scopes {
		ck.scopes[s] = true
	}
	a.mu.Lock()
	if len(a.cache) >= maxKeyCache {
		clear(a.cache) // crude bound on keys that exist; entries live seconds anyway
	}
	a.cache[keyID] = ck
	a.mu.Unlock()
	a.unknown.Remove(keyID)
	return ck
}

// Forget drops a key from this replica's caches (after a change made through this replica).
func (a *KeyAuthenticator) Forget(keyID string) {
	a.mu.Lock()
	delete(a.cache, keyID)
	a.mu.Unlock()
	a.unknown.Remove(keyID)
}

// touch updates last_used_at in the background, at most once a minute per key per replica.
func (a *KeyAuthenticator) touch(keyID string, now time.Time) {
	a.touchMu.Lock()
	last, ok := a.touched[keyID]
	due := !ok || now.Sub(last) >= time.Minute
	if due {
		if len(a.touched) >= maxKeyCache {
			clear(a.touched)
		}
		a.touched[keyID] = now
	}
	a.touchMu.Unlock()
	if !due {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := a.o.Keys.TouchKey(ctx, keyID); err != nil {
			a.o.Logger.Warn("edge: recording key use failed", "key_id", keyID, "err", err)
		}
	}()
}

// ---- Key management endpoints --------------------------------------------------------

// APIKey is the API key record of responses. Secret is set only in the 201 answer of
// POST /v1/api-keys; everywhere else it is absent.
type APIKey struct {
	ID          string   `json:"id"`
	Secret      *string  `json:"secret,omitempty"`
	Scopes      []string `json:"scopes"`
	Label       *string  `json:"label"`
	IsActive    bool     `json:"is_active"`
	Status      string   `json:"status"` // active, inactive or expired
	IPAllowlist []string `json:"ip_allowlist"`
	ExpiresAt   *string  `json:"expires_at"`
	LastUsedAt  *string  `json:"last_used_at"`
	CreatedAt   string   `json:"created_at"`
}

func renderKey(k accounts.Key, now time.Time) APIKey {
	out := APIKey{
		ID: k.ID, Scopes: k.Scopes, Label: k.Label, IsActive: k.IsActive, Status: "active",
		IPAllowlist: []string{}, ExpiresAt: timeOrNil(k.ExpiresAt), LastUsedAt: timeOrNil(k.LastUsedAt),
		CreatedAt: events.FormatTime(k.CreatedAt),
	}
	if out.Scopes == nil {
		out.Scopes = []string{}
	}
	for _, p := range k.IPAllowlist {
		out.IPAllowlist = append(out.IPAllowlist, p.String())
	}
	switch {
	case k.Expired(now):
		out.Status = "expired"
	case !k.IsActive:
		out.Status = "inactive"
	}
	return out
}

// actor names the caller in audit rows. Session ids are secrets and never appear.
func actor(p *Principal) string {
	switch p.Via {
	case CredKey:
		return "key:" + p.KeyID
	case CredSession:
		return "session:" + p.Wallet
	case CredBootstrap:
		return "bootstrap:" + p.Wallet
	}
	return "system"
}

type createKeyRequest struct {
	Scopes      *[]string `json:"scopes"`
	Label       *string   `json:"label"`
	ExpiresAt   *string   `json:"expires_at"`
	IPAllowlist *[]string `json:"ip_allowlist"`
}

const (
	maxLabelLen     = 100
	maxAllowlistLen = 50
)

// createAPIKey serves POST /v1/api-keys (bootstrap token, key with api_keys.write, or a
// session of an editor or owner), idempotent with Idempotency-Key.
func (s *Server) createAPIKey(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p := PrincipalFrom(rc)
	if p == nil || p.AccountID == "" {
		return errNoAccount()
	}
	var req createKeyRequest
	if err := DecodeJSON(rc, &req); err != nil {
		return err
	}
	nk, err := validateNewKey(req, time.Now())
	if err != nil {
		return err
	}
	if p.Via == CredKey {
		// A key makes keys with at most its own powers: api_keys.write must not be a
		// way to widen them (a provisioning key minting an orders.write key, or one
		// without its expiry or allowlist). Sessions and bootstrap tokens are the owner.
		if err := accounts.Within(*p.Key, nk.Scopes, nk.ExpiresAt, nk.IPAllowlist, ""); err != nil {
			return err
		}
	}
	return s.Idempotent(func(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
		ck, err := s.opts.Accounts.CreateKeyTx(ctx, tx, p.AccountID, nk, actor(p))
		if err != nil {
			return TxResult{}, err
		}
		now := time.Now()
		first := renderKey(ck.Key, now)
		secret := ck.Secret
		first.Secret = &secret
		// A repeat gets the record without the secret: it is shown once, and stored
		// responses are plaintext at rest.
		return TxResult{Status: fasthttp.StatusCreated, Body: first, Replay: renderKey(ck.Key, now), ObjectID: ck.ID}, nil
	})(ctx, rc)
}

func validateNewKey(req createKeyRequest, now time.Time) (accounts.NewKey, error) {
	var nk accounts.NewKey
	if req.Scopes == nil {
		return nk, Invalid("scopes", "required", "scopes is required: list the scopes the key may use (there is no default)").
			With("allowed", scopes.All())
	}
	if len(*req.Scopes) == 0 {
		return nk, Invalid("scopes", "min_items", "scopes must name at least one scope").With("allowed", scopes.All())
	}
	seen := map[string]bool{}
	for i, sc := range *req.Scopes {
		if !scopes.Valid(sc) {
			return nk, Invalid("scopes", "enum", "unknown scope "+quote(sc)).
				With("index", i).With("allowed", scopes.All())
		}
		if !seen[sc] {
			seen[sc] = true
			nk.Scopes = append(nk.Scopes, sc)
		}
	}
	if req.Label != nil {
		if err := validLabel(*req.Label); err != nil {
			return nk, err
		}
		nk.Label = req.Label
	}
	if req.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *req.ExpiresAt)
		if err != nil {
			return nk, Invalid("expires_at", "format", "expires_at must be an RFC 3339 timestamp such as 2027-01-01T00:00:00.000Z")
		}
		if !t.After(now) {
			return nk, Invalid("expires_at", "future", "expires_at must be in the future")
		}
		t = t.UTC()
		nk.ExpiresAt = &t
	}
	if req.IPAllowlist != nil {
		ps, err := parseAllowlist(*req.IPAllowlist)
		if err != nil {
			return nk, err
		}
		nk.IPAllowlist = ps
	}
	return nk, nil
}

func validLabel(l string) error {
	if strings.TrimSpace(l) == "" {
		return Invalid("label", "min_length", "label must not be blank; send null for no label")
	}
	if utf8.RuneCountInString(l) > maxLabelLen {
		return Invalid("label", "max_length", "label is longer than 100 characters").With("max_length", maxLabelLen)
	}
	return nil
}

// parseAllowlist accepts IP addresses (v4 or v6) and CIDR prefixes. A prefix with host
// bits set (10.1.2.3/8) is refused rather than silently widened or narrowed.
func parseAllowlist(in []string) ([]netip.Prefix, error) {
	if len(in) > maxAllowlistLen {
		return nil, Invalid("ip_allowlist", "max_items", "ip_allowlist holds at most 50 entries").With("max_items", maxAllowlistLen)
	}
	out := make([]netip.Prefix, 0, len(in))
	for i, v := range in {
		var p netip.Prefix
		if strings.Contains(v, "/") {
			pp, err := netip.ParsePrefix(v)
			if err != nil || pp != pp.Masked() {
				return nil, Invalid("ip_allowlist", "format", "entry "+quote(v)+" is not an IP address or a CIDR prefix such as 203.0.113.0/24").With("index", i)
			}
			p = pp
		} else {
			a, err := netip.ParseAddr(v)
			if err != nil || a.Zone() != "" {
				return nil, Invalid("ip_allowlist", "format", "entry "+quote(v)+" is not an IP address or a CIDR prefix such as 203.0.113.0/24").With("index", i)
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		out = append(out, p)
	}
	return out, nil
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// listAPIKeys serves GET /v1/api-keys: every key of the account that is not revoked,
// oldest first, never with secrets.
func (s *Server) listAPIKeys(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p := PrincipalFrom(rc)
	ks, err := s.opts.Accounts.ListKeys(ctx, p.AccountID)
	if err != nil {
		return err
	}
	now := time.Now()
	out := struct {
		Data []APIKey `json:"data"`
	}{Data: make([]APIKey, 0, len(ks))}
	for _, k := range ks {
		out.Data = append(out.Data, renderKey(k, now))
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}

type updateKeyRequest struct {
	Label       json.RawMessage `json:"label"`
	IsActive    *bool           `json:"is_active"`
	IPAllowlist *[]string       `json:"ip_allowlist"`
}

// updateAPIKey serves PATCH /v1/api-keys/{id}: label (null clears it), is_active,
// ip_allowlist ([] allows any address). Scopes cannot change: create a new key.
func (s *Server) updateAPIKey(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p := PrincipalFrom(rc)
	if len(bytes.TrimSpace(rc.Request.Body())) == 0 {
		return apierr.EmptyPatch.New("the body names no field to change: label, is_active or ip_allowlist")
	}
	var req updateKeyRequest
	if err := DecodeJSON(rc, &req); err != nil {
		return err
	}
	var u accounts.KeyUpdate
	if req.Label != nil {
		u.SetLabel = true
		if string(req.Label) != "null" {
			var l string
			if err := json.Unmarshal(req.Label, &l); err != nil {
				return Invalid("label", "type", "label must be a string or null").With("expected", "string")
			}
			if err := validLabel(l); err != nil {
				return err
			}
			u.Label = &l
		}
	}
	u.IsActive = req.IsActive
	if req.IPAllowlist != nil {
		ps, err := parseAllowlist(*req.IPAllowlist)
		if err != nil {
			return err
		}
		u.IPAllowlist = &ps
	}
	if u.Empty() {
		return apierr.EmptyPatch.New("the body names no field to change: label, is_active or ip_allowlist")
	}
	if p.Via == CredKey {
		u.Caller = p.Key // a key reactivates or widens keys only within itself
	}
	id := pathValue(rc, "id")
	k, err := s.opts.Accounts.UpdateKey(ctx, p.AccountID, id, u, actor(p))
	if errors.Is(err, accounts.ErrNotFound) {
		return keyNotFound(id)
	}
	if err != nil {
		return err
	}
	s.forgetKey(id)
	return WriteJSON(rc, fasthttp.StatusOK, renderKey(k, time.Now()))
}

// revokeAPIKey serves DELETE /v1/api-keys/{id}: the key stops working for good (within
// the key cache bound on other replicas). 204, also when it was already revoked.
func (s *Server) revokeAPIKey(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p := PrincipalFrom(rc)
	id := pathValue(rc, "id")
	err := s.opts.Accounts.RevokeKey(ctx, p.AccountID, id, actor(p))
	if errors.Is(err, accounts.ErrNotFound) {
		return keyNotFound(id)
	}
	if err != nil {
		return err
	}
	s.forgetKey(id)
	NoContent(rc)
	return nil
}

func (s *Server) forgetKey(id string) {
	if ka, ok := s.opts.Keys.(*KeyAuthenticator); ok {
		ka.Forget(id)
	}
}

// keyNotFound answers an unknown key id or one of another account, alike (no existence
// oracle): 404 3022 object_not_found on the path parameter (docs/errors.md).
func keyNotFound(id string) error {
	return apierr.ObjectNotFound.New("no API key " + quote(id) + " on this account").WithField("id")
}

func pathValue(rc *fasthttp.RequestCtx, name string) string {
	v, _ := rc.UserValue(name).(string)
	return v
}
