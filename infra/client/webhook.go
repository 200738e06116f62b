package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"rental/schemas/events"
	"rental/schemas/webhooksig"
)

// Webhook verification (spec "Delivery headers"): X-API-SIGN is base64(HMAC-SHA256(endpoint
// secret, X-API-TIMESTAMP + "." + raw body)), X-API-TIMESTAMP is unix seconds and must be
// within ±300 s of the receiver's clock, the comparison is constant time
// (schemas/webhooksig), and deliveries are deduplicated by event id (X-Event-Id, equal to
// the body's event_id across retries and across primary and backup), never by delivery id.

// Errors of WebhookVerifier.Verify besides webhooksig's (ErrMissing, ErrTimestamp, ErrSkew,
// ErrSignature).
var (
	// ErrDuplicate: the event id was already handled; acknowledge with 2xx and do nothing.
	ErrDuplicate = errors.New("client: webhook event already handled")
	// ErrEventID: the body is not an event envelope or its event_id differs from X-Event-Id.
	ErrEventID = errors.New("client: webhook body is not an envelope matching X-Event-Id")
)

// Deduper remembers handled event ids. Claim returns false when id was claimed before and
// not released; Release forgets a claim whose handling failed (the retry must be handled).
// A receiver with several replicas backs it with its database (a unique key on event_id).
type Deduper interface {
	Claim(ctx context.Context, id string) (bool, error)
	Release(ctx context.Context, id string) error
}

// MemoryDeduper is a per-process Deduper that keeps ids for TTL (default 24 h, longer than
// the 11 h retry schedule).
type MemoryDeduper struct {
	TTL   time.Duration
	Now   func() time.Time
	mu    sync.Mutex
	seen  map[string]time.Time
	sweep time.Time
}

func (m *MemoryDeduper) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Claim implements Deduper.
func (m *MemoryDeduper) Claim(_ context.Context, id string) (bool, error) {
	ttl := m.TTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if m.seen == nil {
		m.seen = map[string]time.Time{}
	}
	if now.Sub(m.sweep) > time.Minute {
		for k, at := range m.seen {
			if now.Sub(at) > ttl {
				delete(m.seen, k)
			}
		}
		m.sweep = now
	}
	if at, ok := m.seen[id]; ok && now.Sub(at) <= ttl {
		return false, nil
	}
	m.seen[id] = now
	return true, nil
}

// Release implements Deduper.
func (m *MemoryDeduper) Release(_ context.Context, id string) error {
	m.mu.Lock()
	delete(m.seen, id)
	m.mu.Unlock()
	return nil
}

// WebhookVerifier checks deliveries for one endpoint. Secrets holds the endpoint's secret;
// during a rotation, the new one first and the old one after it. A receiver serving both
// environments uses one verifier per environment.
type WebhookVerifier struct {
	Secrets []string
	Dedup   Deduper          // nil: a MemoryDeduper
	Now     func() time.Time // nil: time.Now
	MaxBody int64            // largest body read by Handler, default 1 MiB
	once    sync.Once
}

// NewWebhookVerifier returns a verifier of the endpoint's secrets with in-memory dedup.
func NewWebhookVerifier(secrets ...string) *WebhookVerifier {
	return &WebhookVerifier{Secrets: secrets}
}

func (v *WebhookVerifier) init() {
	v.once.Do(func() {
		if v.Dedup == nil {
			v.Dedup = &MemoryDeduper{Now: v.Now}
		}
		if v.MaxBody <= 0 {
			v.MaxBody = 1 << 20
		}
	})
}

// Authenticate checks the signature and the timestamp window of a delivery, over body
// exactly as received, and parses the envelope; it does not dedup.
func (v *WebhookVerifier) Authenticate(h http.Header, body []byte) (events.Envelope, error) {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	ts, sig := h.Get(webhooksig.HeaderTimestamp), h.Get(webhooksig.HeaderSignature)
	err := webhooksig.ErrMissing
	for _, s := range v.Secrets {
		if err = webhooksig.Verify(s, ts, body, sig, now); err == nil || !errors.Is(err, webhooksig.ErrSignature) {
			break
		}
	}
	if err != nil {
		return events.Envelope{}, err
	}
	var env events.Envelope
	if json.Unmarshal(body, &env) != nil || env.EventID == "" || (h.Get("X-Event-Id") != "" && h.Get("X-Event-Id") != env.EventID) {
		return events.Envelope{}, ErrEventID
	}
	return env, nil
}

// Verify authenticates a delivery and claims its event id: ErrDuplicate when the id was
// handled before. Call Release(ctx, id) if handling then fails, so the retry is handled.
func (v *WebhookVerifier) Verify(ctx context.Context, h http.Header, body []byte) (events.Envelope, error) {
	v.init()
	env, err := v.Authenticate(h, body)
	if err != nil {
		return env, err
	}
	ok, err := v.Dedup.Claim(ctx, env.EventID)
	if err != nil {
		return env, err
	}
	if !ok {
		return env, ErrDuplicate
	}
	return env, nil
}

// Release forgets a claimed event id (its handling failed).
func (v *WebhookVerifier) Release(ctx context.Context, id string) error {
	v.init()
	return v.Dedup.Release(ctx, id)
}

// Handler serves deliveries: 401 for a delivery that fails verification (its body is never
// acted on), 200 without calling handle for a duplicate, 200 after handle succeeds, 500
// after it fails (the id is released, so the sender's retry is handled). Events of test
// deliveries (env.Test) reach handle too; they must never trigger a money action. Unknown
// event types must be ignored by handle, not refused.
func (v *WebhookVerifier) Handler(handle func(ctx context.Context, env events.Envelope) error) http.Handler {
	v.init()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, v.MaxBody+1))
		if err != nil || int64(len(body)) > v.MaxBody {
			http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
			return
		}
		env, err := v.Verify(r.Context(), r.Header, body)
		switch {
		case errors.Is(err, ErrDuplicate):
			w.WriteHeader(http.StatusOK)
			return
		case err != nil:
			http.Error(w, "delivery not verified", http.StatusUnauthorized)
			return
		}
		if err := handle(r.Context(), env); err != nil {
			_ = v.Release(r.Context(), env.EventID)
			http.Error(w, "handling failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
