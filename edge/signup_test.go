package edge

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"rental/infra/accounts"
	"rental/infra/deposits"
	"rental/infra/idempotency"
	"rental/infra/ratelimit"
	"rental/infra/sessions"
	"rental/infra/signup"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/network"
)

// ---- the real stack: edge + Postgres + Redis, signup, session and account modules ----

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

type stackConfig struct {
	start      time.Time
	nonces     func() (string, error)
	perIP      redis_rate.Limit
	perAddress redis_rate.Limit
	ceiling    redis_rate.Limit
	// sources: X-Forwarded-For from loopback is believed (requests from chosen sources)
	sources bool
}

type signupStack struct {
	*testServer
	db       *testenv.DB
	clock    *testClock // signup challenges and tokens, sessions
	accounts *accounts.Store
	deposits *deposits.Store
	sessions *sessions.Store
}

const (
	testBrand = "tronrent"
	testHost  = "api.rental.test"
)

func newSignupStack(t *testing.T, opts ...func(*stackConfig)) *signupStack {
	t.Helper()
	cfg := stackConfig{start: time.Now().UTC()}
	for _, f := range opts {
		f(&cfg)
	}
	db := testenv.Postgres(t)
	rdb, prefix := testenv.Redis(t)
	clk := &testClock{t: cfg.start}

	challenges, err := signup.New(db.Pool, signup.Options{
		Brand: testBrand, Host: testHost, Network: network.Nile, Now: clk.Now, NewNonce: cfg.nonces,
	})
	if err != nil {
		t.Fatal(err)
	}
	limiter := signup.NewChallengeLimiter(rdb, signup.LimiterOptions{
		KeyPrefix: prefix, PerIP: cfg.perIP, PerAddress: cfg.perAddress, AddressCeiling: cfg.ceiling,
	})
	if cfg.perIP.IsZero() && cfg.perAddress.IsZero() { // tests of other concerns: out of the way
		limiter = signup.NewChallengeLimiter(rdb, signup.LimiterOptions{KeyPrefix: prefix,
			PerIP: redis_rate.PerSecond(10_000), PerAddress: redis_rate.PerSecond(10_000)})
	}
	master := make([]byte, 32)
	acc, err := accounts.New(db.Pool, accounts.Options{MasterKey: master})
	if err != nil {
		t.Fatal(err)
	}
	deriver, err := deposits.NewDeriver(deposits.DevSeedHex)
	if err != nil {
		t.Fatal(err)
	}
	dep, err := deposits.NewStore(db.Pool, deposits.Options{Deriver: deriver, USDTContract: network.Nile.USDTContract()})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := sessions.NewStore(db.Pool, sessions.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	su, err := NewSignup(SignupOptions{Brand: testBrand, Network: network.Nile, Challenges: challenges,
		Limiter: limiter, Accounts: acc, Deposits: dep})
	if err != nil {
		t.Fatal(err)
	}
	sm, err := NewSession(SessionOptions{Network: network.Nile, Challenges: challenges, Sessions: sess, Accounts: acc})
	if err != nil {
		t.Fatal(err)
	}
	rl := RateLimits{Order: 1000, Read: 1000, Management: 1000, IP: redis_rate.PerSecond(10_000)}
	sources := AccountSources{Brand: testBrand, Network: network.Nile, Deposits: DepositAddressRefs{Store: dep}}
	ap, err := NewAccountPatch(AccountPatchOptions{Accounts: acc, Sources: sources, RateLimits: rl})
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, withOptions(func(o *Options) {
		o.Brand = testBrand
		o.Bootstrap = su.Bootstrap()
		o.Sessions = sm.Authenticator()
		o.Modules = []Module{su, sm, ap}
		o.Accounts = acc
		o.Idempotency = idempotency.New(db.Pool, idempotency.Options{})
		o.Account = sources
		o.Limiter = ratelimit.New(rdb, prefix)
		o.RateLimits = rl
		if cfg.sources {
			o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		}
	}))
	return &signupStack{testServer: ts, db: db, clock: clk, accounts: acc, deposits: dep, sessions: sess}
}

// post sends a JSON body.
func (st *signupStack) post(t *testing.T, path string, body any, header ...string) response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return st.do(t, "POST", path, "application/json", string(b), header...)
}

// challenge asks for a challenge and checks it was issued.
func (st *signupStack) challenge(t *testing.T, addr tron.Address, purpose string) map[string]any {
	t.Helper()
	body := map[string]any{"address": addr.String()}
	if purpose != "" {
		body["purpose"] = purpose
	}
	r := st.post(t, "/v1/accounts/challenge", body)
	if r.status != 201 {
		t.Fatalf("challenge: %d %s", r.status, r.body)
	}
	return r.json
}

// signed makes a challenge of purpose for key and returns {address, nonce, signature}.
func (st *signupStack) signed(t *testing.T, key tron.PrivateKey, purpose string) map[string]any {
	t.Helper()
	c := st.challenge(t, key.Address(), purpose)
	sig, err := key.SignMessageV2([]byte(c["message"].(string)))
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"address": key.Address().String(), "nonce": c["nonce"], "signature": sig}
}

// bootstrap signs a signup challenge and returns the bootstrap token response.
func (st *signupStack) bootstrap(t *testing.T, key tron.PrivateKey) map[string]any {
	t.Helper()
	r := st.post(t, "/v1/accounts/challenge/verify", st.signed(t, key, "signup"))
	if r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	return r.json
}

func bearer(tok map[string]any) []string {
	return []string{"Authorization", "Bearer " + tok["bootstrap_token"].(string)}
}

func (st *signupStack) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := st.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func newKey(t *testing.T) tron.PrivateKey {
	t.Helper()
	k, err := tron.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// the single 1010 answer, identical whatever the cause.
func want1010(t *testing.T, r response) string {
	t.Helper()
	e := wantError(t, r, 401, 1010, "challenge_invalid", nil)
	if e["retryable"] != false { // the same nonce never verifies again: a fresh challenge is a new request
		t.Errorf("1010 retryable: %s", r.body)
	}
	return e["message"].(string)
}

// ---- TronWeb vectors through HTTP ----

type challengeVectors struct {
	Brand, Host, Network string
	IssuedAt             string `json:"issued_at"`
	ExpiresAt            string `json:"expires_at"`
	Vectors              []struct {
		Address, Purpose, Nonce, Message, Signature string
		Altered                                     string `json:"altered_message_signature"`
	}
}

// Signatures made by TronWeb's signMessageV2 over the challenge text are accepted; any
// altered byte of the signature, or a signature over a text altered by one byte, is 1010;
// the refusals do not use the challenge up.
func TestTronWebSignedChallengesThroughHTTP(t *testing.T) {
	b, err := os.ReadFile("../infra/signup/testdata/challenge_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v challengeVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Brand != testBrand || v.Host != testHost || v.Network != "nile" || len(v.Vectors) != 3 {
		t.Fatalf("vectors made for another configuration: %s %s %s", v.Brand, v.Host, v.Network)
	}
	start, _ := time.Parse(time.RFC3339, v.IssuedAt)
	var mu sync.Mutex
	next := 0
	st := newSignupStack(t, func(c *stackConfig) {
		c.start = start
		c.nonces = func() (string, error) {
			mu.Lock()
			defer mu.Unlock()
			n := v.Vectors[next].Nonce
			next++
			return n, nil
		}
	})
	for _, vec := range v.Vectors {
		addr := tron.MustAddress(vec.Address)
		c := st.challenge(t, addr, vec.Purpose)
		if c["message"] != vec.Message || c["nonce"] != vec.Nonce || c["issued_at"] != v.IssuedAt ||
			c["expires_at"] != v.ExpiresAt || c["purpose"] != vec.Purpose || c["address"] != vec.Address {
			t.Fatalf("challenge differs from the TronWeb vector:\n%v\nwant message %q", c, vec.Message)
		}
		path := "/v1/accounts/challenge/verify"
		if vec.Purpose == "login" {
			path = "/v1/session"
		}
		sig, _ := hex.DecodeString(strings.TrimPrefix(vec.Signature, "0x"))
		var altered []string
		for _, i := range []int{0, 17, 31, 32, 50, 63, 64} { // r, s and v
			a := slices.Clone(sig)
			a[i] ^= 0x01
			altered = append(altered, "0x"+hex.EncodeToString(a))
		}
		altered = append(altered, vec.Altered, "0x"+hex.EncodeToString(sig[:64]), vec.Signature+"00", "not hex")
		var messages []string
		for _, a := range altered {
			r := st.post(t, path, map[string]any{"address": vec.Address, "nonce": vec.Nonce, "signature": a})
			messages = append(messages, want1010(t, r))
		}
		if len(slices.Compact(slices.Clone(messages))) != 1 {
			t.Errorf("1010 messages differ by cause: %q", messages)
		}
		// Without the 0x prefix the TronWeb signature is accepted, after all those refusals.
		r := st.post(t, path, map[string]any{"address": vec.Address, "nonce": vec.Nonce,
			"signature": strings.TrimPrefix(vec.Signature, "0x")})
		if vec.Purpose == "login" {
			if r.status != 201 || r.json["address"] != vec.Address || r.json["role"] != "owner" {
				t.Fatalf("session with TronWeb signature: %d %s", r.status, r.body)
			}
		} else if r.status != 200 || !strings.HasPrefix(r.json["bootstrap_token"].(string), "abt_") {
			t.Fatalf("verify with TronWeb signature: %d %s", r.status, r.body)
		}
		// and only once.
		want1010(t, st.post(t, path, map[string]any{"address": vec.Address, "nonce": vec.Nonce, "signature": vec.Signature}))
	}
}

// ---- challenge ----

func TestChallengeShapeAndValidation(t *testing.T) {
	st := newSignupStack(t)
	key := newKey(t)
	c := st.challenge(t, key.Address(), "")
	if c["purpose"] != "signup" || c["address"] != key.Address().String() {
		t.Fatalf("challenge %v", c)
	}
	nonce := c["nonce"].(string)
	if len(nonce) != 32 || strings.Trim(nonce, "0123456789abcdef") != "" {
		t.Errorf("nonce %q: want 128 bits of lowercase hex", nonce)
	}
	issued, _ := time.Parse(time.RFC3339, c["issued_at"].(string))
	expires, _ := time.Parse(time.RFC3339, c["expires_at"].(string))
	if expires.Sub(issued) != 10*time.Minute || !strings.HasSuffix(c["issued_at"].(string), "Z") {
		t.Errorf("issued %v expires %v", c["issued_at"], c["expires_at"])
	}
	msg := c["message"].(string)
	for _, part := range []string{testBrand, "Host: " + testHost, "Network: nile", key.Address().String(),
		"Purpose: signup", "Nonce: " + nonce, "Issued At: " + c["issued_at"].(string),
		"Expiration Time: " + c["expires_at"].(string)} {
		if !strings.Contains(msg, part) {
			t.Errorf("message lacks %q:\n%s", part, msg)
		}
	}
	if c2 := st.challenge(t, key.Address(), ""); c2["nonce"] == nonce {
		t.Error("nonce repeated")
	}

	// Bad input is refused and stores nothing.
	before := st.count(t, "signup_challenges")
	wantError(t, st.post(t, "/v1/accounts/challenge", map[string]any{}), 400, 2001, "validation_failed", "address")
	wantError(t, st.post(t, "/v1/accounts/challenge", map[string]any{"address": "TQ1234"}), 400, 2007, "invalid_address", "address")
	bad := []byte(key.Address().String())
	bad[10] ^= 1
	wantError(t, st.post(t, "/v1/accounts/challenge", map[string]any{"address": string(bad)}), 400, 2007, "invalid_address", "address")
	wantError(t, st.post(t, "/v1/accounts/challenge", map[string]any{"address": key.Address().String(), "purpose": "admin"}),
		400, 2001, "validation_failed", "purpose")
	wantError(t, st.post(t, "/v1/accounts/challenge", map[string]any{"address": key.Address().String(), "extra": 1}),
		400, 2001, "validation_failed", "extra")
	wantError(t, st.do(t, "POST", "/v1/accounts/challenge", "text/plain", `{}`), 400, 2000, "malformed_json", nil)
	if after := st.count(t, "signup_challenges"); after != before {
		t.Errorf("bad input stored %d challenges", after-before)
	}
}

// The challenge answers alike for an address that owns an account and one that does not.
func TestChallengeIsNoExistenceOracle(t *testing.T) {
	st := newSignupStack(t)
	owner, stranger := newKey(t), newKey(t)
	tok := st.bootstrap(t, owner)
	if r := st.post(t, "/v1/accounts", map[string]any{"address": owner.Address().String()}, bearer(tok)...); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	shape := func(k tron.PrivateKey) (int, []string, []string, string) {
		r := st.post(t, "/v1/accounts/challenge", map[string]any{"address": k.Address().String(), "purpose": "login"})
		var keys, headers []string
		for k := range r.json {
			keys = append(keys, k)
		}
		for h := range r.header {
			if h != "Date" && h != "Content-Length" {
				headers = append(headers, h)
			}
		}
		slices.Sort(keys)
		slices.Sort(headers)
		msg := strings.NewReplacer(k.Address().String(), "ADDR", r.json["nonce"].(string), "NONCE",
			r.json["issued_at"].(string), "T0", r.json["expires_at"].(string), "T1").Replace(r.json["message"].(string))
		return r.status, keys, headers, msg
	}
	s1, k1, h1, m1 := shape(owner)
	s2, k2, h2, m2 := shape(stranger)
	if s1 != s2 || !slices.Equal(k1, k2) || !slices.Equal(h1, h2) || m1 != m2 {
		t.Fatalf("answers differ:\n%d %v %v %q\n%d %v %v %q", s1, k1, h1, m1, s2, k2, h2, m2)
	}
}

func TestChallengeRateLimitedPerAddressAndPerIP(t *testing.T) {
	st := newSignupStack(t, func(c *stackConfig) {
		c.perAddress = redis_rate.Limit{Rate: 2, Burst: 2, Period: time.Minute}
		c.perIP = redis_rate.Limit{Rate: 5, Burst: 5, Period: time.Minute}
	})
	a, b := newKey(t), newKey(t)
	for range 2 {
		st.challenge(t, a.Address(), "")
	}
	r := st.post(t, "/v1/accounts/challenge", map[string]any{"address": a.Address().String()})
	wantError(t, r, 429, 1100, "rate_limited", nil)
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After %q", ra)
	}
	// Another address from the same IP still gets challenges until the IP budget is spent:
	// 3 of 5 were taken (the refused one counts against the IP, not the address).
	for range 2 {
		st.challenge(t, b.Address(), "")
	}
	r = st.post(t, "/v1/accounts/challenge", map[string]any{"address": newKey(t).Address().String()})
	wantError(t, r, 429, 1100, "rate_limited", nil)
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	if n := st.count(t, "signup_challenges"); n != 4 {
		t.Errorf("%d challenges stored, want 4", n)
	}
}

// The review's lockout (docs/signup.md "Challenge budgets"): one source asking for a
// victim's challenges spends its own budget for that address, not the victim's; the
// address's ceiling over all sources is higher.
func TestChallengeBudgetPerSourceAndAddress(t *testing.T) {
	st := newSignupStack(t, func(c *stackConfig) {
		c.perAddress = redis_rate.Limit{Rate: 2, Burst: 2, Period: time.Minute}
		c.perIP = redis_rate.Limit{Rate: 100, Burst: 100, Period: time.Minute}
		c.ceiling = redis_rate.Limit{Rate: 4, Burst: 4, Period: time.Minute}
		c.sources = true
	})
	victim := newKey(t).Address().String()
	from := func(src string) response {
		return st.post(t, "/v1/accounts/challenge", map[string]any{"address": victim}, "X-Forwarded-For", src)
	}
	for range 2 {
		checkFields(t, from("203.0.113.7"), 201, nil)
	}
	for range 10 { // the attacker keeps asking: refused, and its refusals drain nothing shared
		wantError(t, from("203.0.113.7"), 429, 1100, "rate_limited", nil)
	}
	// The victim, from another source, still gets its challenges.
	checkFields(t, from("198.51.100.9"), 201, nil)
	checkFields(t, from("198.51.100.9"), 201, nil)
	// The ceiling (4) over all sources holds: a third source finds it spent.
	wantError(t, from("192.0.2.1"), 429, 1100, "rate_limited", nil)
	if n := st.count(t, "signup_challenges"); n != 4 {
		t.Errorf("%d challenges stored, want 4", n)
	}
}

// IPv6 sources are networks (docs/auth.md "Per-IP budgets"): addresses of one /64 share
// the challenge budget per source, another /64 has its own.
func TestChallengeBudgetPerIPv6Network(t *testing.T) {
	st := newSignupStack(t, func(c *stackConfig) {
		c.perIP = redis_rate.Limit{Rate: 3, Burst: 3, Period: time.Minute}
		c.perAddress = redis_rate.Limit{Rate: 100, Burst: 100, Period: time.Minute}
		c.sources = true
	})
	ask := func(src string) response {
		return st.post(t, "/v1/accounts/challenge", map[string]any{"address": newKey(t).Address().String()}, "X-Forwarded-For", src)
	}
	for _, src := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff:ffff:ffff:ffff"} {
		checkFields(t, ask(src), 201, nil)
	}
	wantError(t, ask("2001:db8:1:2:abcd::9"), 429, 1100, "rate_limited", nil)
	checkFields(t, ask("2001:db8:1:3::1"), 201, nil)
}

// ---- verify ----

func TestVerifyRefusesEveryBadNonceWithOneError(t *testing.T) {
	st := newSignupStack(t)
	key, other := newKey(t), newKey(t)
	var messages []string

	// reused
	s := st.signed(t, key, "signup")
	if r := st.post(t, "/v1/accounts/challenge/verify", s); r.status != 200 {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
	messages = append(messages, want1010(t, st.post(t, "/v1/accounts/challenge/verify", s)))

	// unknown, and malformed
	s = st.signed(t, key, "signup")
	unknown := map[string]any{"address": s["address"], "nonce": "0123456789abcdef0123456789abcdef", "signature": s["signature"]}
	messages = append(messages, want1010(t, st.post(t, "/v1/accounts/challenge/verify", unknown)))
	unknown["nonce"] = "nonce!"
	messages = append(messages, want1010(t, st.post(t, "/v1/accounts/challenge/verify", unknown)))

	// wrong address: another valid address, with the other key's signature over the message
	c := st.challenge(t, key.Address(), "signup")
	sig, _ := other.SignMessageV2([]byte(c["message"].(string)))
	messages = append(messages, want1010(t, st.post(t, "/v1/accounts/challenge/verify",
		map[string]any{"address": other.Address().String(), "nonce": c["nonce"], "signature": sig})))
	// signed by another key for the right address
	messages = append(messages, want1010(t, st.post(t, "/v1/accounts/challenge/verify",
		map[string]any{"address": key.Address().String(), "nonce": c["nonce"], "signature": sig})))

	// a login challenge is not a signup challenge
	messages = append(messages, want1010(t, st.post(t, "/v1/accounts/challenge/verify", st.signed(t, key, "login"))))

	// expired: exactly ten minutes after issue
	s = st.signed(t, key, "signup")
	st.clock.Advance(10 * time.Minute)
	messages = append(messages, want1010(t, st.post(t, "/v1/accounts/challenge/verify", s)))

	if len(slices.Compact(slices.Clone(messages))) != 1 {
		t.Errorf("1010 messages differ by cause: %q", messages)
	}
	if n := st.count(t, "bootstrap_tokens"); n != 1 {
		t.Errorf("%d tokens issued, want 1", n)
	}
	// Missing fields are validation errors, not 1010.
	wantError(t, st.post(t, "/v1/accounts/challenge/verify", map[string]any{"address": key.Address().String(), "nonce": "ab"}),
		400, 2001, "validation_failed", "signature")
	wantError(t, st.post(t, "/v1/accounts/challenge/verify", map[string]any{"address": "nope", "nonce": "ab", "signature": "00"}),
		400, 2007, "invalid_address", "address")
}

func TestVerifyConcurrentOneNonceOneToken(t *testing.T) {
	st := newSignupStack(t)
	s := st.signed(t, newKey(t), "signup")
	const n = 20
	results := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = st.post(t, "/v1/accounts/challenge/verify", s) }()
	}
	wg.Wait()
	ok := 0
	for _, r := range results {
		switch r.status {
		case 200:
			ok++
		case 401:
			want1010(t, r)
		default:
			t.Errorf("unexpected %d %s", r.status, r.body)
		}
	}
	if ok != 1 || st.count(t, "bootstrap_tokens") != 1 {
		t.Fatalf("%d verifies succeeded and %d tokens exist, want exactly one", ok, st.count(t, "bootstrap_tokens"))
	}
}

// ---- bootstrap token ----

func TestBootstrapTokenEndpointsAndExpiry(t *testing.T) {
	st := newSignupStack(t)
	key := newKey(t)
	tok := st.bootstrap(t, key)
	if tok["account_id"] != nil || tok["account_status"] != nil {
		t.Fatalf("new address got account fields: %v", tok)
	}
	exp, _ := time.Parse(time.RFC3339, tok["expires_at"].(string))
	if d := exp.Sub(st.clock.Now()); d < 15*time.Minute-time.Second || d > 15*time.Minute {
		t.Errorf("token lifetime %s, want 15 min", d)
	}
	// Only the hash is stored.
	var stored []byte
	if err := st.db.Pool.QueryRow(context.Background(), `SELECT token_hash FROM bootstrap_tokens`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored), tok["bootstrap_token"].(string)[4:]) {
		t.Error("token stored in the clear")
	}
	h := bearer(tok)

	// Before the account exists there is nothing to read.
	wantError(t, st.do(t, "GET", "/v1/accounts/deposit-address", "", "", h...), 401, 1011, "bootstrap_token_expired", nil)

	r := st.post(t, "/v1/accounts", map[string]any{"address": key.Address().String(), "label": "ops"}, h...)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := r.json["account_id"].(string)

	r = st.do(t, "GET", "/v1/accounts/deposit-address", "", "", h...)
	if r.status != 200 || r.json["account_id"] != id || r.json["status"] != "unfunded" ||
		r.json["min_deposit_sun"] != float64(DefaultMinDepositSun) || len(r.json["data"].([]any)) != 2 {
		t.Fatalf("deposit-address: %d %s", r.status, r.body)
	}
	r = st.do(t, "GET", "/v1/accounts/deposit-address?currency=USDT", "", "", h...)
	if data := r.json["data"].([]any); len(data) != 1 || data[0].(map[string]any)["currency"] != "USDT" {
		t.Fatalf("currency filter: %s", r.body)
	}
	wantError(t, st.do(t, "GET", "/v1/accounts/deposit-address?currency=BTC", "", "", h...), 400, 2001, "validation_failed", "currency")

	r = st.do(t, "GET", "/v1/account", "", "", h...)
	if r.status != 200 || r.json["id"] != id || r.json["label"] != "ops" {
		t.Fatalf("GET /v1/account: %d %s", r.status, r.body)
	}
	r = st.post(t, "/v1/api-keys", map[string]any{"scopes": []string{"account.read"}}, h...)
	if r.status != 201 {
		t.Fatalf("POST /v1/api-keys: %d %s", r.status, r.body)
	}

	// Anywhere else the token is 1011.
	for _, call := range [][2]string{{"GET", "/v1/balance"}, {"GET", "/v1/session"}, {"GET", "/v1/api-keys"},
		{"POST", "/v1/session/revoke-all"}, {"GET", "/v1/deposit-addresses"}, {"PATCH", "/v1/account"}} {
		body := `{}`
		if call[0] == "GET" {
			body = "" // a GET with a body is refused before authentication
		}
		wantError(t, st.do(t, call[0], call[1], "application/json", body, h...), 401, 1011, "bootstrap_token_expired", nil)
	}
	// A verify for the address that now owns the account reports it.
	tok2 := st.bootstrap(t, key)
	if tok2["account_id"] != id || tok2["account_status"] != "unfunded" {
		t.Fatalf("existing account not reported: %v", tok2)
	}
	// Unknown and expired tokens are 1011 on the token's own endpoints.
	wantError(t, st.do(t, "GET", "/v1/account", "", "", "Authorization", "Bearer abt_AAAA"), 401, 1011, "bootstrap_token_expired", nil)
	st.clock.Advance(15 * time.Minute)
	for _, hh := range [][]string{h, bearer(tok2)} {
		wantError(t, st.do(t, "GET", "/v1/account", "", "", hh...), 401, 1011, "bootstrap_token_expired", nil)
		wantError(t, st.post(t, "/v1/accounts", map[string]any{"address": key.Address().String()}, hh...), 401, 1011, "bootstrap_token_expired", nil)
	}
}

// ---- POST /v1/accounts ----

func TestCreateAccountWithTokenThenAgain(t *testing.T) {
	st := newSignupStack(t)
	key := newKey(t)
	h := bearer(st.bootstrap(t, key))
	body := map[string]any{"address": key.Address().String(), "email": "ops@example.com", "label": "Main desk"}

	// Bad input creates nothing.
	for field, bad := range map[string]any{"email": "not-an-email", "label": "   "} {
		b := map[string]any{"address": key.Address().String(), field: bad}
		wantError(t, st.post(t, "/v1/accounts", b, h...), 400, 2001, "validation_failed", field)
	}
	wantError(t, st.post(t, "/v1/accounts", map[string]any{"address": newKey(t).Address().String()}, h...),
		400, 2001, "validation_failed", "address")
	wantError(t, st.post(t, "/v1/accounts", map[string]any{"address": key.Address().String(), "nonce": "00"}, h...),
		400, 2001, "validation_failed", "nonce")
	if n := st.count(t, "accounts"); n != 0 {
		t.Fatalf("bad input created %d accounts", n)
	}

	r := st.post(t, "/v1/accounts", body, h...)
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	j := r.json
	if !strings.HasPrefix(j["account_id"].(string), "acc_") || j["brand"] != testBrand || j["network"] != "nile" ||
		j["status"] != "unfunded" || j["owner_address"] != key.Address().String() ||
		j["email"] != "ops@example.com" || j["label"] != "Main desk" {
		t.Fatalf("AccountCreated: %s", r.body)
	}
	if _, err := time.Parse(time.RFC3339, j["created_at"].(string)); err != nil {
		t.Errorf("created_at: %v", err)
	}
	rows := j["deposit_addresses"].([]any)
	if len(rows) != 2 {
		t.Fatalf("deposit_addresses: %v", rows)
	}
	trx, usdt := rows[0].(map[string]any), rows[1].(map[string]any)
	addr := trx["address"].(string)
	if _, err := tron.ParseAddress(addr); err != nil || usdt["address"] != addr || addr == key.Address().String() {
		t.Fatalf("deposit address %v / %v", trx, usdt)
	}
	wantTRX := map[string]any{"currency": "TRX", "address": addr, "memo": nil, "confirmations_required": float64(19),
		"contract": nil, "rate_now": nil, "spread_bps": nil, "min": nil, "max": nil}
	wantUSDT := map[string]any{"currency": "USDT", "address": addr, "memo": nil, "confirmations_required": float64(19),
		"contract": network.Nile.USDTContract(), "rate_now": nil, "spread_bps": float64(deposits.DefaultSpreadBps),
		"min": "5", "max": "2000"}
	if fmt.Sprint(trx) != fmt.Sprint(wantTRX) || fmt.Sprint(usdt) != fmt.Sprint(wantUSDT) {
		t.Errorf("rows\n got %v\n     %v\nwant %v\n     %v", trx, usdt, wantTRX, wantUSDT)
	}
	next := j["next"].(map[string]any)
	if next["action"] != "deposit" || next["address"] != addr || next["reason"] != "account is unfunded" {
		t.Errorf("next %v", next)
	}

	// Again: 200, same account, nothing created or changed.
	body["label"] = "Renamed"
	r = st.post(t, "/v1/accounts", body, h...)
	if r.status != 200 || r.json["account_id"] != j["account_id"] || r.json["label"] != "Main desk" ||
		fmt.Sprint(r.json["deposit_addresses"]) != fmt.Sprint(j["deposit_addresses"]) {
		t.Fatalf("repeat: %d %s", r.status, r.body)
	}
	if a, d := st.count(t, "accounts"), st.count(t, "deposit_addresses"); a != 1 || d != 1 {
		t.Fatalf("%d accounts and %d deposit addresses, want 1 and 1", a, d)
	}
}

func TestCreateAccountOneShotAndConcurrent(t *testing.T) {
	st := newSignupStack(t)
	key := newKey(t)

	// Without a token, nonce and signature are required and checked.
	wantError(t, st.post(t, "/v1/accounts", map[string]any{"address": key.Address().String()}), 400, 2001, "validation_failed", "nonce")
	s := st.signed(t, key, "login") // wrong purpose
	s["label"] = "x"
	want1010(t, st.post(t, "/v1/accounts", s))
	if n := st.count(t, "accounts"); n != 0 {
		t.Fatalf("%d accounts created by refused calls", n)
	}

	// Ten concurrent one-shot creates, each with its own signed challenge: one account.
	const n = 10
	bodies := make([]map[string]any, n)
	for i := range bodies {
		bodies[i] = st.signed(t, key, "signup")
	}
	results := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = st.post(t, "/v1/accounts", bodies[i]) }()
	}
	wg.Wait()
	created := 0
	for _, r := range results {
		switch r.status {
		case 201:
			created++
		case 200:
		default:
			t.Fatalf("unexpected %d %s", r.status, r.body)
		}
		if r.json["account_id"] != results[0].json["account_id"] ||
			fmt.Sprint(r.json["deposit_addresses"]) != fmt.Sprint(results[0].json["deposit_addresses"]) {
			t.Fatalf("answers name different accounts or addresses: %s / %s", r.body, results[0].body)
		}
	}
	if created != 1 || st.count(t, "accounts") != 1 || st.count(t, "deposit_addresses") != 1 {
		t.Fatalf("%d creates answered 201; %d accounts, %d deposit addresses", created,
			st.count(t, "accounts"), st.count(t, "deposit_addresses"))
	}
	// The nonce of a one-shot create is used up.
	want1010(t, st.post(t, "/v1/accounts", bodies[0]))
	// The creation is audited once.
	var audits int
	st.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'account.create'`).Scan(&audits)
	if audits != 1 {
		t.Errorf("%d account.create audit rows", audits)
	}
}

// A browser keeps sending the session cookie it holds (or a stale one) with every request.
// On the signup endpoints, which do not take sessions, the cookie must be ignored: the
// bootstrap token or the public one-shot signature decides.
func TestStaleSessionCookieIgnoredWhereSessionsAreNotAccepted(t *testing.T) {
	st := newSignupStack(t)
	key := newKey(t)
	cookie := []string{"Cookie", SessionCookie + "=stale-or-foreign-session"}
	r := st.post(t, "/v1/accounts", st.signed(t, key, "signup"), cookie...)
	if r.status != 201 {
		t.Fatalf("public one-shot create with a stale cookie: %d %s", r.status, r.body)
	}
	r = st.do(t, "GET", "/v1/accounts/deposit-address", "", "", append(bearer(st.bootstrap(t, key)), cookie...)...)
	if r.status != 200 {
		t.Fatalf("deposit-address with a stale cookie: %d %s", r.status, r.body)
	}
	// Where sessions are accepted, the same cookie is still judged: 1013.
	wantError(t, st.do(t, "GET", "/v1/session", "", "", cookie...), 401, 1013, "session_expired", nil)
}
