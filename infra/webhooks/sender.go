package webhooks

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"rental/schemas/events"
	"rental/schemas/webhooksig"
)

// Delivery header names (rental-api-v1 "Delivery headers"); the signature headers are
// webhooksig.HeaderTimestamp and webhooksig.HeaderSignature.
const (
	HeaderEventID         = "X-Event-Id"
	HeaderEventType       = "X-Event-Type"
	HeaderEventVersion    = "X-Event-Version"
	HeaderDeliveryID      = "X-Delivery-Id"
	HeaderDeliveryAttempt = "X-Delivery-Attempt"
	ContentType           = "application/json; charset=utf-8"
)

// ExcerptBytes is how much of a receiver's answer is kept (the test call returns it).
const ExcerptBytes = 512

// Sender posts signed deliveries.
type Sender struct {
	Client    *http.Client     // Policy.Client: SSRF-safe, no redirects, 10 s bound
	UserAgent string           // "<brand>-webhook/1"
	Now       func() time.Time // default time.Now
}

// UserAgent is the User-Agent of deliveries for a brand.
func UserAgent(brand string) string { return brand + "-webhook/1" }

// Message is what is sent: the envelope's raw bytes and the header values taken from it.
type Message struct {
	EventID      string
	EventType    string
	EventVersion int
	Body         []byte // sent and signed byte for byte
}

// Sent is the outcome of one POST.
type Sent struct {
	DeliveryID string
	Status     int // 0 when no answer arrived
	Latency    time.Duration
	Excerpt    []byte // the first ExcerptBytes of the answer's body
	Err        error  // connection failure, timeout, or a dial refused by the policy
}

// OK reports a delivered message: a 2xx answer within the time bound.
func (s Sent) OK() bool { return s.Err == nil && s.Status >= 200 && s.Status < 300 }

// Send posts m to t as attempt number attempt, signed with t's secret at send time.
func (s *Sender) Send(ctx context.Context, t Target, m Message, attempt int) Sent {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	out := Sent{DeliveryID: events.NewID("dlv")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(m.Body))
	if err != nil {
		out.Err = err
		return out
	}
	ts := webhooksig.Timestamp(now())
	h := req.Header
	h.Set("Content-Type", ContentType)
	h.Set("User-Agent", s.UserAgent)
	h.Set(HeaderEventID, m.EventID)
	h.Set(HeaderEventType, m.EventType)
	h.Set(HeaderEventVersion, strconv.Itoa(m.EventVersion))
	h.Set(HeaderDeliveryID, out.DeliveryID)
	h.Set(HeaderDeliveryAttempt, strconv.Itoa(attempt))
	h.Set(webhooksig.HeaderTimestamp, ts)
	h.Set(webhooksig.HeaderSignature, webhooksig.Sign(t.Secret, ts, m.Body))
	start := time.Now()
	resp, err := s.Client.Do(req)
	if err != nil {
		out.Latency = time.Since(start)
		out.Err = err
		return out
	}
	defer resp.Body.Close()
	out.Status = resp.StatusCode
	ex, err := io.ReadAll(io.LimitReader(resp.Body, ExcerptBytes))
	out.Excerpt = ex
	if err == nil {
		// Drain a little more so the connection can be reused; a huge answer is cut off.
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	}
	out.Latency = time.Since(start)
	if err != nil {
		out.Err = err // e.g. the 10 s bound ran out while the answer was still arriving
	}
	return out
}
