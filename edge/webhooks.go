package edge

// Webhook endpoint management (rental-api-v1 "Webhooks"; docs/webhooks.md):
//
//	POST   /v1/webhooks                     register (secret returned once)
//	GET    /v1/webhooks                     list (never a secret)
//	PATCH  /v1/webhooks/{id}                url, events, is_active, role (a role swap is atomic)
//	POST   /v1/webhooks/{id}/rotate-secret  new secret, returned once, effective at once
//	POST   /v1/webhooks/{id}/test           synthetic signed delivery, answered synchronously
//	DELETE /v1/webhooks/{id}                hard delete; queued deliveries for it are dropped
//	GET    /v1/webhooks/{id}/deliveries     delivery history (our addition, docs/webhooks.md)
//
// Keys (webhooks.read / webhooks.write) or dashboard sessions; a bootstrap token is refused
// by the endpoint table (Auth K|S). Delivery itself is consumers/webhookdelivery.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/go-redis/redis_rate/v10"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/accounts"
	"rental/infra/idempotency"
	"rental/infra/ratelimit"
	"rental/infra/webhooks"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
)

// WebhooksOptions are the webhook module's dependencies.
type WebhooksOptions struct {
	Store       *webhooks.Store    // required
	Idempotency *idempotency.Store // required (Idempotency-Key on the POSTs and PATCH)
	Policy      webhooks.Policy    // which URLs may be registered and dialled
	Brand       string             // User-Agent of test deliveries; required
	Network     network.Network    // the `network` of test events
	Now         func() time.Time   // default time.Now
	// Limiter charges TestBudget, each account's budget of test calls (429 1100 beyond
	// it): a test call sends a request from our network and returns part of the answer.
	// nil: no budget (tests of other concerns).
	Limiter    *ratelimit.Limiter
	TestBudget redis_rate.Limit // default DefaultWebhookTestBudget
}

// DefaultWebhookTestBudget is each account's default budget of webhook test calls.
var DefaultWebhookTestBudget = redis_rate.Limit{Rate: 30, Burst: 10, Period: time.Hour}

// Webhooks is the module serving the webhook endpoints.
type Webhooks struct {
	o                     WebhooksOptions
	sender                *webhooks.Sender
	create, patch, rotate HandlerFunc
}

// NewWebhooks checks the options.
func NewWebhooks(o WebhooksOptions) (*Webhooks, error) {
	if o.Store == nil || o.Idempotency == nil || o.Brand == "" {
		return nil, errors.New("edge: webhooks: Store, Idempotency and Brand are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, errors.New("edge: webhooks: " + err.Error())
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TestBudget.IsZero() {
		o.TestBudget = DefaultWebhookTestBudget
	}
	m := &Webhooks{o: o}
	m.sender = &webhooks.Sender{Client: o.Policy.Client(4), UserAgent: webhooks.UserAgent(o.Brand), Now: o.Now}
	m.create = idempotentOn(o.Idempotency, m.createEndpoint)
	m.patch = idempotentOn(o.Idempotency, m.updateEndpoint)
	m.rotate = idempotentOn(o.Idempotency, m.rotateSecret)
	return m, nil
}

// Handlers implements Module.
func (m *Webhooks) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{
		"POST /v1/webhooks":                    m.create,
		"GET /v1/webhooks":                     m.list,
		"PATCH /v1/webhooks/{id}":              m.patch,
		"DELETE /v1/webhooks/{id}":             m.delete,
		"POST /v1/webhooks/{id}/rotate-secret": m.rotate,
		"POST /v1/webhooks/{id}/test":          m.test,
		"GET /v1/webhooks/{id}/deliveries":     m.deliveries,
	}
}

// webhookRecord is the endpoint record of every response; Secret only in the answers of
// create and rotate-secret, and never in their idempotent replays.
type webhookRecord struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Events    *[]string `json:"events"` // null: every event type, new ones included
	Role      string    `json:"role"`
	IsActive  bool      `json:"is_active"`
	Secret    string    `json:"secret,omitempty"`
	CreatedAt string    `json:"created_at"`
	UpdatedAt string    `json:"updated_at"`
}

func renderWebhook(e webhooks.Endpoint) webhookRecord {
	r := webhookRecord{ID: e.ID, URL: e.URL, Role: e.Role, IsActive: e.IsActive,
		CreatedAt: events.FormatTime(e.CreatedAt), UpdatedAt: events.FormatTime(e.UpdatedAt)}
	if e.Events != nil {
		evs := slices.Clone(e.Events)
		r.Events = &evs
	}
	return r
}

// webhookNotFound answers an unknown id and another account's endpoint alike: 404 3022
// object_not_found on the path parameter (docs/errors.md).
func webhookNotFound(id string) error {
	return apierr.ObjectNotFound.New("no webhook endpoint " + quote(id) + " on this account").WithField("id")
}

func accountOf(rc *fasthttp.RequestCtx) (*Principal, error) {
	p := PrincipalFrom(rc)
	if p == nil || p.AccountID == "" {
		return nil, errNoAccount()
	}
	return p, nil
}

// parseEvents reads an `events` value: null means every type (new ones included); a list
// must name known types, at least one; repeats are folded.
func parseEvents(raw json.RawMessage) ([]string, error) {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, Invalid("events", "type", "events must be an array of event types or null").With("expected", "array")
	}
	if len(list) == 0 {
		return nil, Invalid("events", "min_items", "events must name at least one event type; null (or leaving it out) subscribes to all").
			With("allowed", webhooks.EventTypes())
	}
	out := make([]string, 0, len(list))
	for i, t := range list {
		if !webhooks.KnownEventType(t) {
			return nil, Invalid("events", "enum", "unknown event type "+quote(t)).With("index", i).With("allowed", webhooks.EventTypes())
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func parseRole(v string) (string, error) {
	if v != webhooks.RolePrimary && v != webhooks.RoleBackup {
		return "", Invalid("role", "enum", "role must be primary or backup").With("allowed", []string{webhooks.RolePrimary, webhooks.RoleBackup})
	}
	return v, nil
}

type createWebhookRequest struct {
	URL    *string         `json:"url"`
	Events json.RawMessage `json:"events"`
	Role   *string         `json:"role"`
}

func (m *Webhooks) createEndpoint(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
	p, err := accountOf(rc)
	if err != nil {
		return TxResult{}, err
	}
	var req createWebhookRequest
	if err := DecodeJSON(rc, &req); err != nil {
		return TxResult{}, err
	}
	if req.URL == nil || *req.URL == "" {
		return TxResult{}, Invalid("url", "required", "url is required")
	}
	if err := m.o.Policy.CheckURL(ctx, *req.URL); err != nil {
		return TxResult{}, err
	}
	var n webhooks.NewEndpoint
	n.URL = *req.URL
	if req.Events != nil {
		if n.Events, err = parseEvents(req.Events); err != nil {
			return TxResult{}, err
		}
	}
	if req.Role != nil {
		if n.Role, err = parseRole(*req.Role); err != nil {
			return TxResult{}, err
		}
	}
	t, err := m.o.Store.Create(ctx, tx, p.AccountID, n)
	if err != nil {
		return TxResult{}, err
	}
	if err := accounts.WriteAudit(ctx, tx, p.AccountID, actor(p), "webhook.create",
		map[string]any{"webhook_id": t.ID, "url": t.URL, "role": t.Role}); err != nil {
		return TxResult{}, err
	}
	body := renderWebhook(t.Endpoint)
	replay := body
	body.Secret = t.Secret
	return TxResult{Status: fasthttp.StatusCreated, Body: body, Replay: replay, ObjectID: t.ID}, nil
}

func (m *Webhooks) list(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := accountOf(rc)
	if err != nil {
		return err
	}
	es, err := m.o.Store.List(ctx, p.AccountID)
	if err != nil {
		return err
	}
	out := make([]webhookRecord, len(es))
	for i, e := range es {
		out[i] = renderWebhook(e)
	}
	return WriteJSON(rc, fasthttp.StatusOK, map[string]any{"data": out})
}

type updateWebhookRequest struct {
	URL      *string         `json:"url"`
	Events   json.RawMessage `json:"events"`
	IsActive *bool           `json:"is_active"`
	Role     *string         `json:"role"`
}

func (m *Webhooks) updateEndpoint(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
	p, err := accountOf(rc)
	if err != nil {
		return TxResult{}, err
	}
	const fields = "url, events, is_active or role"
	if len(bytes.TrimSpace(rc.Request.Body())) == 0 {
		return TxResult{}, apierr.EmptyPatch.New("the body names no field to change: " + fields)
	}
	var req updateWebhookRequest
	if err := DecodeJSON(rc, &req); err != nil {
		return TxResult{}, err
	}
	var u webhooks.Update
	if req.URL != nil {
		if err := m.o.Policy.CheckURL(ctx, *req.URL); err != nil {
			return TxResult{}, err
		}
		u.URL = req.URL
	}
	if req.Events != nil {
		u.SetEvents = true
		if u.Events, err = parseEvents(req.Events); err != nil {
			return TxResult{}, err
		}
	}
	u.IsActive = req.IsActive
	if req.Role != nil {
		r, err := parseRole(*req.Role)
		if err != nil {
			return TxResult{}, err
		}
		u.Role = &r
	}
	if u.Empty() {
		return TxResult{}, apierr.EmptyPatch.New("the body names no field to change: " + fields)
	}
	id := pathValue(rc, "id")
	e, err := m.o.Store.Update(ctx, tx, p.AccountID, id, u)
	if errors.Is(err, webhooks.ErrNotFound) {
		return TxResult{}, webhookNotFound(id)
	}
	if err != nil {
		return TxResult{}, err
	}
	if err := accounts.WriteAudit(ctx, tx, p.AccountID, actor(p), "webhook.update",
		map[string]any{"webhook_id": id, "url": e.URL, "role": e.Role, "is_active": e.IsActive}); err != nil {
		return TxResult{}, err
	}
	return TxResult{Status: fasthttp.StatusOK, Body: renderWebhook(e), ObjectID: id}, nil
}

func (m *Webhooks) rotateSecret(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
	p, err := accountOf(rc)
	if err != nil {
		return TxResult{}, err
	}
	if len(bytes.TrimSpace(rc.Request.Body())) > 0 {
		var empty struct{}
		if err := DecodeJSON(rc, &empty); err != nil {
			return TxResult{}, err
		}
	}
	id := pathValue(rc, "id")
	t, err := m.o.Store.RotateSecret(ctx, tx, p.AccountID, id)
	if errors.Is(err, webhooks.ErrNotFound) {
		return TxResult{}, webhookNotFound(id)
	}
	if err != nil {
		return TxResult{}, err
	}
	if err := accounts.WriteAudit(ctx, tx, p.AccountID, actor(p), "webhook.rotate_secret",
		map[string]any{"webhook_id": id}); err != nil {
		return TxResult{}, err
	}
	body := renderWebhook(t.Endpoint)
	replay := body
	body.Secret = t.Secret
	return TxResult{Status: fasthttp.StatusOK, Body: body, Replay: replay, ObjectID: id}, nil
}

func (m *Webhooks) delete(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := accountOf(rc)
	if err != nil {
		return err
	}
	id := pathValue(rc, "id")
	err = m.o.Store.Delete(ctx, p.AccountID, id)
	if errors.Is(err, webhooks.ErrNotFound) {
		return webhookNotFound(id)
	}
	if err != nil {
		return err
	}
	if err := accounts.WriteAudit(ctx, m.o.Store.Pool(), p.AccountID, actor(p), "webhook.delete",
		map[string]any{"webhook_id": id}); err != nil {
		return err
	}
	NoContent(rc)
	return nil
}

type testWebhookRequest struct {
	Event *string `json:"event"`
}

// testResult is the answer of POST /v1/webhooks/{id}/test.
type testResult struct {
	Delivered    bool    `json:"delivered"`
	StatusCode   *int    `json:"status_code"` // null when no answer arrived
	LatencyMS    int64   `json:"latency_ms"`
	ResponseBody string  `json:"response_body"` // the first 512 bytes the receiver answered
	Error        *string `json:"error"`
	EventID      string  `json:"event_id"`
	DeliveryID   string  `json:"delivery_id"`
}

// test sends one synthetic event (test = true) to the endpoint, whatever its is_active and
// events filter, signed with its current secret. It is never retried and never recorded
// in the delivery history.
func (m *Webhooks) test(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := accountOf(rc)
	if err != nil {
		return err
	}
	evType := events.EventOrderConfirmed
	if len(bytes.TrimSpace(rc.Request.Body())) > 0 {
		var req testWebhookRequest
		if err := DecodeJSON(rc, &req); err != nil {
			return err
		}
		if req.Event != nil {
			if !webhooks.KnownEventType(*req.Event) {
				return Invalid("event", "enum", "unknown event type "+quote(*req.Event)).With("allowed", webhooks.EventTypes())
			}
			evType = *req.Event
		}
	}
	id := pathValue(rc, "id")
	t, err := m.o.Store.GetTarget(ctx, p.AccountID, id)
	if errors.Is(err, webhooks.ErrNotFound) {
		return webhookNotFound(id)
	}
	if err != nil {
		return err
	}
	if err := m.chargeTest(ctx, p.AccountID); err != nil {
		return err
	}
	env, err := events.New(evType, p.AccountID, m.o.Network, events.SampleData(evType))
	if err != nil {
		return err
	}
	env.Test = true
	env.CreatedAt = events.Time(m.o.Now())
	body, err := json.Marshal(env)
	if err != nil {
		return err
	}
	sent := m.sender.Send(ctx, t, webhooks.Message{EventID: env.EventID, EventType: evType, EventVersion: env.EventVersion, Body: body}, 1)
	res := testResult{Delivered: sent.OK(), LatencyMS: sent.Latency.Milliseconds(), ResponseBody: string(sent.Excerpt),
		EventID: env.EventID, DeliveryID: sent.DeliveryID}
	if sent.Status != 0 {
		st := sent.Status
		res.StatusCode = &st
	}
	switch {
	case sent.Err != nil && webhooks.IsBlocked(sent.Err):
		msg := "target address not allowed"
		res.Error = &msg
	case sent.Err != nil:
		msg := "connection failed or no answer within 10 s"
		res.Error = &msg
	case !sent.OK():
		msg := "non-2xx answer"
		res.Error = &msg
	}
	return WriteJSON(rc, fasthttp.StatusOK, res)
}

// chargeTest takes one test call from the account's budget: 429 1100 with Retry-After when
// it is spent. A Redis failure lets the call through (budgets are fairness; the port rule
// and the dial-time guard are the protection).
func (m *Webhooks) chargeTest(ctx context.Context, accountID string) error {
	if m.o.Limiter == nil {
		return nil
	}
	d, err := m.o.Limiter.GCRA(ctx, "webhooktest:"+accountID, m.o.TestBudget)
	if err != nil || d.Allowed {
		return nil
	}
	return apierr.RateLimited.Newf("this account's budget of %d webhook test calls per %s is spent", m.o.TestBudget.Rate, m.o.TestBudget.Period).
		With("limit", m.o.TestBudget.Rate).WithRetryAfter(max(ratelimit.Seconds(d.RetryAfter), 1))
}

// deliveryRecord is one attempt of the delivery history.
type deliveryRecord struct {
	ID            string  `json:"id"`
	EventID       string  `json:"event_id"`
	Event         string  `json:"event"`
	Role          string  `json:"role"`
	Attempt       int     `json:"attempt"`
	Status        string  `json:"status"`
	StatusCode    *int    `json:"status_code"`
	Error         *string `json:"error"`
	LatencyMS     int     `json:"latency_ms"`
	Next          string  `json:"next"`
	NextAttemptAt *string `json:"next_attempt_at"`
	AttemptedAt   string  `json:"attempted_at"`
}

// deliveries lists an endpoint's delivery history, newest first, paged by cursor.
func (m *Webhooks) deliveries(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := accountOf(rc)
	if err != nil {
		return err
	}
	q, err := queryParams(rc, "limit", "cursor")
	if err != nil {
		return err
	}
	limit, err := pageLimit(q, 50, 200)
	if err != nil {
		return err
	}
	id := pathValue(rc, "id")
	if _, err := m.o.Store.Get(ctx, m.o.Store.Pool(), p.AccountID, id); errors.Is(err, webhooks.ErrNotFound) {
		return webhookNotFound(id)
	} else if err != nil {
		return err
	}
	ds, more, err := m.o.Store.Deliveries(ctx, p.AccountID, id, limit, q["cursor"])
	if err != nil {
		return err
	}
	out := make([]deliveryRecord, len(ds))
	for i, d := range ds {
		out[i] = deliveryRecord{ID: d.ID, EventID: d.EventID, Event: d.EventType, Role: d.Role, Attempt: d.Attempt,
			Status: d.Status, StatusCode: d.HTTPStatus, Error: d.Error, LatencyMS: d.LatencyMS, Next: d.Next,
			AttemptedAt: events.FormatTime(d.AttemptedAt)}
		if d.NextAttemptAt != nil {
			s := events.FormatTime(*d.NextAttemptAt)
			out[i].NextAttemptAt = &s
		}
	}
	var next *string
	if more && len(ds) > 0 {
		c := ds[len(ds)-1].ID
		next = &c
	}
	return WriteJSON(rc, fasthttp.StatusOK, map[string]any{"data": out, "next_cursor": next})
}
