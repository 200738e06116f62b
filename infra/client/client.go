// Package client is a Go client of rental-api-v1 for integrators: it signs requests with an
// API key, applies the spec's retry policy, decodes typed records and errors, pages through
// cursor lists and verifies webhook deliveries. It uses only net/http and the module's
// schemas (the wire contract), so what it sends is what any client must send.
//
// Signing (spec "Request signing") reuses infra/reqsign, the same canonical-string builder
// the edge verifies with:
//
//	X-API-SIGN = base64(HMAC-SHA256(secret, timestamp + METHOD + path + ("?" + raw query) + raw body))
//
// Every attempt, retries included, is signed afresh at the clock's current millisecond (a
// signature is single use: 1009 replayed_signature).
//
// Retry policy (spec "Errors", recommended retry policy), applied by Do and every typed call:
//   - 429 (any code) is retried: the request was refused before any work.
//   - 5xx, a dropped connection and a timeout are retried only for retry-safe requests: GET
//     and DELETE, POST /v1/orders (same client_order_id on every attempt), and any call made
//     with Idempotent(). 5002 delegation_failed is never retried (the spec forbids reusing
//     that client_order_id) and neither is a 5xx whose catalogue row says not retryable
//     (9002 not_implemented).
//   - 4002 balance_reserved and 4004 ledger_conflict are retried like 5xx. 4001
//     insufficient_funds is returned at once: its cause is fixed only by a deposit, after
//     which the caller repeats the same CreateOrder (same client_order_id, nothing was
//     charged).
//   - 1003 signature_timestamp_skew is retried once after correcting the clock by the
//     server's details.server_time ("yes, once after fixing the clock").
//   - Everything else (400, 401, 403, 404, 409 other than 4004, 422) is returned at once.
//
// Waits: a Retry-After header takes precedence; otherwise full jitter, a uniform wait in
// [0, min(30 s, 250 ms x 2^n)] before retry n+1. The client gives up once the next wait
// would take the call past 60 s in total (Policy), returning a *GiveUpError around the last
// failure. CreateOrder then looks the order up by client_order_id (GET
// /v1/orders?client_order_id=...), as it does after 3015 request_in_progress, so the caller
// learns whether the order exists.
//
// The policy is kept by hand rather than with github.com/cenkalti/backoff/v4: that
// library's jitter is a randomization factor around the interval, not full jitter, and it
// has no notion of a server's Retry-After, which here must replace the computed wait.
//
// Clock and jitter are options (WithClock, WithJitter) so tests can assert every wait.
package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"rental/infra/reqsign"
	"rental/schemas/apierr"
)

// Clock is the client's time source: Now signs requests and measures the retry budget,
// Sleep waits between attempts (returning ctx.Err() when ctx ends first).
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Policy is the retry policy's numbers; DefaultPolicy is the spec's.
type Policy struct {
	Initial    time.Duration // ceiling of the first computed wait (250 ms)
	MaxWait    time.Duration // cap of any computed wait (30 s)
	MaxElapsed time.Duration // total time budget of one call, waits included (60 s)
}

// DefaultPolicy is the spec's recommended retry policy.
var DefaultPolicy = Policy{Initial: 250 * time.Millisecond, MaxWait: 30 * time.Second, MaxElapsed: 60 * time.Second}

// Client calls one deployment (base URL such as https://api.example.com) with one API key.
// It is safe for concurrent use.
type Client struct {
	base   string
	keyID  string
	secret string
	http   *http.Client
	clock  Clock
	jitter func(max time.Duration) time.Duration
	policy Policy
	ua     string

	mu     sync.Mutex
	offset time.Duration      // server clock minus ours, learnt from 1003
	recent map[[32]byte]int64 // request fingerprint -> last millisecond it was signed at
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the http.Client (default: 30 s timeout per attempt, up to 64 idle
// connections kept per host).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithClock sets the clock used for signing, waits and the retry budget.
func WithClock(k Clock) Option { return func(c *Client) { c.clock = k } }

// WithJitter sets the source of full jitter: it returns a wait in [0, max]. The default is
// uniform random.
func WithJitter(f func(max time.Duration) time.Duration) Option {
	return func(c *Client) { c.jitter = f }
}

// WithPolicy replaces DefaultPolicy.
func WithPolicy(p Policy) Option { return func(c *Client) { c.policy = p } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

// New returns a client of baseURL signing with the key id and secret (as issued, prefix
// included). keyID and secret may be empty for public calls only.
func New(baseURL, keyID, secret string, opts ...Option) *Client {
	c := &Client{
		base:   strings.TrimRight(baseURL, "/"),
		keyID:  keyID,
		secret: secret,
		http:   defaultHTTPClient(),
		clock:  wallClock{},
		jitter: func(max time.Duration) time.Duration { return rand.N(max + 1) },
		policy: DefaultPolicy,
		ua:     "rental-go-client/1",
		recent: map[[32]byte]int64{},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// defaultHTTPClient: 30 s per attempt, and idle connections kept for concurrent callers
// (net/http's default keeps two per host, which makes a busy client reconnect constantly).
func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Timeout: 30 * time.Second, Transport: t}
}

// Response is an answer as received.
type Response struct {
	Status   int
	Header   http.Header
	Body     []byte
	Attempts int // attempts made by the call, 1 when the first answered
}

// RequestID is the answer's X-Request-Id.
func (r *Response) RequestID() string { return r.Header.Get("X-Request-Id") }

// CallOption adjusts one call.
type CallOption func(*call)

type call struct {
	idempotent bool
	header     http.Header
	noRetry    bool
}

// Idempotent marks a POST or PATCH as safe to repeat verbatim (it carries an
// Idempotency-Key or another idempotency field), so 5xx and dropped connections are retried.
func Idempotent() CallOption { return func(c *call) { c.idempotent = true } }

// Header adds a request header (Idempotency-Key, for example).
func Header(name, value string) CallOption { return func(c *call) { c.header.Set(name, value) } }

// NoRetry makes exactly one attempt.
func NoRetry() CallOption { return func(c *call) { c.noRetry = true } }

// Do sends one signed request (signed only when the client has a key) with the retry
// policy. target is the path with /v1 and, if any, "?" and the query exactly as it is to be
// sent; body is the raw JSON (nil for none). It returns the last answer received (nil when
// none was) and, for a non-2xx answer, an *Error (wrapped in a *GiveUpError when retries
// ran out).
func (c *Client) Do(ctx context.Context, method, target string, body []byte, opts ...CallOption) (*Response, error) {
	cl := call{header: http.Header{}}
	if method == http.MethodGet || method == http.MethodDelete || method == http.MethodHead {
		cl.idempotent = true
	}
	for _, o := range opts {
		o(&cl)
	}
	began := c.clock.Now()
	var (
		resp      *Response
		err       error
		skewFixed bool
		waited    time.Duration
	)
	for attempt := 1; ; attempt++ {
		resp, err = c.once(ctx, method, target, body, cl.header)
		if resp != nil {
			resp.Attempts = attempt
		}
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return resp, err
		}
		var ae *Error
		if errors.As(err, &ae) && ae.Code == apierr.SignatureTimestampSkew.Code && !skewFixed {
			if c.learnOffset(ae) {
				skewFixed = true
				continue
			}
		}
		if cl.noRetry || !shouldRetry(err, cl.idempotent) {
			return resp, err
		}
		wait := c.backoff(attempt, err)
		if c.clock.Now().Sub(began)+wait > c.policy.MaxElapsed {
			return resp, &GiveUpError{Attempts: attempt, Waited: waited, Err: err}
		}
		if serr := c.clock.Sleep(ctx, wait); serr != nil {
			return resp, err
		}
		waited += wait
	}
}

// shouldRetry is the spec's retry rule for one failed attempt.
func shouldRetry(err error, idempotent bool) bool {
	var ae *Error
	if !errors.As(err, &ae) {
		return idempotent // no answer: outcome unknown, safe to repeat only when idempotent
	}
	switch {
	case ae.Status == http.StatusTooManyRequests:
		return true
	case ae.Code == apierr.DelegationFailed.Code:
		return false
	case ae.Code == apierr.BalanceReserved.Code || ae.Code == apierr.LedgerConflict.Code:
		return idempotent
	case ae.Status >= 500:
		if k, ok := apierr.ByCode(ae.Code); ok && !k.Retryable {
			return false
		}
		return idempotent
	}
	return false
}

// backoff is the wait before attempt n+1: Retry-After when the answer had one, else full
// jitter in [0, min(MaxWait, Initial x 2^(n-1))].
func (c *Client) backoff(n int, err error) time.Duration {
	var ae *Error
	if errors.As(err, &ae) && ae.RetryAfter > 0 {
		return ae.RetryAfter
	}
	ceil := c.policy.Initial
	for i := 1; i < n && ceil < c.policy.MaxWait; i++ {
		ceil *= 2
	}
	if ceil > c.policy.MaxWait {
		ceil = c.policy.MaxWait
	}
	return c.jitter(ceil)
}

// learnOffset adopts the server's clock from a 1003's details.server_time.
func (c *Client) learnOffset(ae *Error) bool {
	s, _ := ae.Details["server_time"].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return false
	}
	c.mu.Lock()
	c.offset = t.Sub(c.clock.Now())
	c.mu.Unlock()
	return true
}

// timestamp is the signing time of a request: the clock (corrected by a learnt offset) at
// millisecond precision, moved one millisecond past the last signature of an identical
// request, so that no two signatures repeat (1009).
func (c *Client) timestamp(method, target string, body []byte) time.Time {
	fp := sha256.Sum256(append([]byte(method+" "+target+"\n"), body...))
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now().Add(c.offset).UnixMilli()
	if last, ok := c.recent[fp]; ok && now <= last {
		now = last + 1
	}
	if len(c.recent) > 4096 {
		for k, v := range c.recent {
			if v < now {
				delete(c.recent, k)
			}
		}
	}
	c.recent[fp] = now
	return time.UnixMilli(now).UTC()
}

// once makes one attempt.
func (c *Client) once(ctx context.Context, method, target string, body []byte, extra http.Header) (*Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+target, rd)
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if c.keyID != "" {
		SignRequest(req, c.keyID, c.secret, c.timestamp(method, req.URL.RequestURI(), body), body)
	}
	hr, err := c.http.Do(req)
	if err != nil {
		return nil, &TransportError{Method: method, Target: target, Err: err}
	}
	defer hr.Body.Close()
	b, err := io.ReadAll(hr.Body)
	if err != nil {
		return nil, &TransportError{Method: method, Target: target, Err: err}
	}
	resp := &Response{Status: hr.StatusCode, Header: hr.Header, Body: b}
	if hr.StatusCode >= 200 && hr.StatusCode < 300 {
		return resp, nil
	}
	return resp, decodeError(resp)
}

// SignRequest sets X-API-KEY, X-API-TIMESTAMP and X-API-SIGN on r for a send at now. body
// must be exactly the bytes r will send (nil for none). The request-target signed is
// r.URL.RequestURI(), which is what net/http puts on the wire.
func SignRequest(r *http.Request, keyID, secret string, now time.Time, body []byte) {
	for k, v := range reqsign.Headers(keyID, secret, now, r.Method, r.URL.RequestURI(), body) {
		r.Header.Set(k, v)
	}
}

// TransportError is an attempt that got no answer (connection refused or dropped,
// timeout): the outcome of a write is unknown.
type TransportError struct {
	Method, Target string
	Err            error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("client: %s %s: no answer: %v", e.Method, e.Target, e.Err)
}
func (e *TransportError) Unwrap() error { return e.Err }

// GiveUpError is the last failure of a call whose retry budget ran out.
type GiveUpError struct {
	Attempts int
	Waited   time.Duration // sum of the waits between attempts
	Err      error
}

func (e *GiveUpError) Error() string {
	return fmt.Sprintf("client: gave up after %d attempts (%s waited): %v", e.Attempts, e.Waited, e.Err)
}
func (e *GiveUpError) Unwrap() error { return e.Err }

// Error is an error envelope received from the API.
type Error struct {
	Status    int            // HTTP status
	Code      int            // error.code: branch on it (or Slug), never on Status alone
	Slug      string         // error.slug
	Message   string         // error.message, for logs only
	Field     string         // error.field, "" when null
	Retryable bool           // error.retryable as the server said
	Details   map[string]any // error.details
	RequestID string         // request_id
	// RetryAfter is the Retry-After header, 0 when absent.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("HTTP %d: %d %s (%s): %s [request %s]", e.Status, e.Code, e.Slug, e.Field, e.Message, e.RequestID)
	}
	return fmt.Sprintf("HTTP %d: %d %s: %s [request %s]", e.Status, e.Code, e.Slug, e.Message, e.RequestID)
}

// Is makes errors.Is(err, apierr.InsufficientFunds) match an Error with that code.
func (e *Error) Is(target error) bool {
	k, ok := target.(*apierr.Code)
	return ok && k.Code == e.Code
}

// Catalogue is the catalogue row of the code; ok is false for a code this client does not
// know (treat 4xx as a client fault and 5xx as transient, as the spec says).
func (e *Error) Catalogue() (*apierr.Code, bool) { return apierr.ByCode(e.Code) }

func decodeError(r *Response) *Error {
	var env struct {
		Error struct {
			Code      int            `json:"code"`
			Slug      string         `json:"slug"`
			Message   string         `json:"message"`
			Field     *string        `json:"field"`
			Retryable bool           `json:"retryable"`
			Details   map[string]any `json:"details"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	e := &Error{Status: r.Status, RequestID: r.RequestID(), RetryAfter: retryAfter(r.Header.Get("Retry-After"))}
	if json.Unmarshal(r.Body, &env) == nil && env.Error.Code != 0 {
		e.Code, e.Slug, e.Message, e.Retryable, e.Details = env.Error.Code, env.Error.Slug, env.Error.Message, env.Error.Retryable, env.Error.Details
		if env.Error.Field != nil {
			e.Field = *env.Error.Field
		}
		if env.RequestID != "" {
			e.RequestID = env.RequestID
		}
		return e
	}
	// No envelope (a proxy's answer): classify by HTTP class as the spec says for unknown codes.
	e.Message = strings.TrimSpace(string(r.Body))
	if len(e.Message) > 200 {
		e.Message = e.Message[:200]
	}
	e.Retryable = r.Status == http.StatusTooManyRequests || r.Status >= 500
	return e
}

// retryAfter reads a Retry-After value: delay seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// getJSON GETs target and decodes a 2xx body into out.
func (c *Client) getJSON(ctx context.Context, target string, out any) (*Response, error) {
	resp, err := c.Do(ctx, http.MethodGet, target, nil)
	if err != nil {
		return resp, err
	}
	return resp, decodeInto(resp, out)
}

func decodeInto(resp *Response, out any) error {
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("client: decoding the answer (HTTP %d, request %s): %w", resp.Status, resp.RequestID(), err)
	}
	return nil
}
