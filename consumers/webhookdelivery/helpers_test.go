package webhookdelivery_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/consumers/webhookdelivery"
	"rental/infra/accounts"
	"rental/infra/kafka"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/webhooks"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/topics"
	"rental/schemas/webhooksig"
)

const testBrand = "tronrent"

var testMasterKey = []byte("0123456789abcdef0123456789abcdef")

// received is one request the receiver got.
type received struct {
	Path       string
	At         time.Time
	EventID    string
	EventType  string
	DeliveryID string
	Attempt    int
	OrderID    string
	Seq        int
	Answered   int
}

// receiver is a real HTTP server on loopback that checks every delivery the way an
// integrator would: each header of the spec, and the signature with the secret of the
// endpoint (path) it was sent to. Its answer is chosen per request by Answer.
type receiver struct {
	t   testing.TB
	srv *httptest.Server

	mu      sync.Mutex
	secrets map[string]string // path -> secret
	got     []received
	seenDlv map[string]bool
	// Answer picks the HTTP status for a request (default 200).
	Answer func(r received) int
}

func newReceiver(t testing.TB) *receiver {
	rc := &receiver{t: t, secrets: map[string]string{}, seenDlv: map[string]bool{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) url(path string) string { return rc.srv.URL + path }

func (rc *receiver) setSecret(path, secret string) {
	rc.mu.Lock()
	rc.secrets[path] = secret
	rc.mu.Unlock()
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	var env struct {
		Event        string `json:"event"`
		EventID      string `json:"event_id"`
		EventVersion int    `json:"event_version"`
		AccountID    string `json:"account_id"`
		Test         bool   `json:"test"`
		Data         struct {
			OrderID string `json:"order_id"`
			Seq     int    `json:"seq"`
		} `json:"data"`
	}
	fail := func(format string, args ...any) {
		rc.t.Errorf("receiver %s: "+format, append([]any{r.URL.Path}, args...)...)
	}
	if err := json.Unmarshal(body, &env); err != nil {
		fail("body is not JSON: %v", err)
	}
	h := r.Header
	want := map[string]string{
		"Content-Type":    "application/json; charset=utf-8",
		"X-Event-Id":      env.EventID,
		"X-Event-Type":    env.Event,
		"X-Event-Version": "1",
		"User-Agent":      testBrand + "-webhook/1",
	}
	for k, v := range want {
		if h.Get(k) != v {
			fail("header %s = %q, want %q", k, h.Get(k), v)
		}
	}
	if r.Method != http.MethodPost {
		fail("method %s", r.Method)
	}
	attempt, err := strconv.Atoi(h.Get("X-Delivery-Attempt"))
	if err != nil || attempt < 1 {
		fail("X-Delivery-Attempt %q", h.Get("X-Delivery-Attempt"))
	}
	rec := received{Path: r.URL.Path, At: at, EventID: env.EventID, EventType: env.Event, DeliveryID: h.Get("X-Delivery-Id"),
		Attempt: attempt, OrderID: env.Data.OrderID, Seq: env.Data.Seq}
	rc.mu.Lock()
	secret, known := rc.secrets[r.URL.Path]
	dup := rc.seenDlv[rec.DeliveryID]
	rc.seenDlv[rec.DeliveryID] = true
	answer := rc.Answer
	rc.mu.Unlock()
	if rec.DeliveryID == "" || dup {
		fail("X-Delivery-Id %q empty or seen before", rec.DeliveryID)
	}
	if !known {
		fail("no secret known for this path")
	} else if err := webhooksig.Verify(secret, h.Get("X-API-TIMESTAMP"), body, h.Get("X-API-SIGN"), time.Now()); err != nil {
		fail("signature: %v", err)
	}
	status := 200
	if answer != nil {
		status = answer(rec)
	}
	rec.Answered = status
	rc.mu.Lock()
	rc.got = append(rc.got, rec)
	rc.mu.Unlock()
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"ok":true}`))
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// env is a real Postgres database, a Kafka broker over TCP and one account.
type env struct {
	db      *testenv.DB
	broker  string
	store   *webhooks.Store
	account string
	rcv     *receiver
	prod    *kgo.Client
	reg     *prometheus.Registry // the deliverer's metrics, when a test sets it before start
}

func newEnv(t testing.TB) *env {
	t.Helper()
	// Delivery tests publish hand-made envelopes with partial data: not schema-checked.
	e := &env{db: testenv.Postgres(t), broker: testenv.Kafka(t, testenv.SyntheticPayloads)}
	var err error
	if e.store, err = webhooks.NewStore(e.db.Pool, testMasterKey); err != nil {
		t.Fatal(err)
	}
	e.account = newAccount(t, e.db)
	e.rcv = newReceiver(t)
	if e.prod, err = kafka.NewClient([]string{e.broker}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.prod.Close)
	return e
}

func newAccount(t testing.TB, db *testenv.DB) string {
	t.Helper()
	var b [20]byte
	_, _ = rand.Read(b[:])
	addr, err := tron.AddressFromBytes(b[:])
	if err != nil {
		t.Fatal(err)
	}
	st, err := accounts.New(db.Pool, accounts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := st.CreateOrGetByOwner(context.Background(), network.Nile, addr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// endpoint registers the receiver's path as an endpoint with role.
func (e *env) endpoint(t testing.TB, role, path string) webhooks.Target {
	t.Helper()
	var tg webhooks.Target
	err := e.store.InTx(context.Background(), func(tx pgx.Tx) error {
		var err error
		tg, err = e.store.Create(context.Background(), tx, e.account, webhooks.NewEndpoint{URL: e.rcv.url(path), Role: role})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.rcv.setSecret(path, tg.Secret)
	return tg
}

// publish produces a customer event the way the outbox relay does: the envelope's JSON
// on the event's topic, keyed by the id the topic is keyed by.
func (e *env) publish(t testing.TB, eventType string, data map[string]any) events.Envelope {
	t.Helper()
	env, err := events.New(eventType, e.account, network.Nile, data)
	if err != nil {
		t.Fatal(err)
	}
	topic, ok := topics.ForEvent(eventType)
	if !ok {
		t.Fatalf("no topic for %s", eventType)
	}
	key := e.account
	if id, ok := data[topic.Key].(string); ok {
		key = id
	}
	b, _ := json.Marshal(env)
	if err := e.prod.ProduceSync(context.Background(), &kgo.Record{Topic: topic.Name, Key: []byte(key), Value: b}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return env
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// start runs a deliverer until the test ends.
func (e *env) start(t testing.TB, delays []time.Duration) {
	t.Helper()
	var reg prometheus.Registerer = prometheus.NewRegistry()
	if e.reg != nil {
		reg = e.reg
	}
	d, err := webhookdelivery.New(webhookdelivery.Options{
		Brokers: []string{e.broker}, Store: e.store, Brand: testBrand, Delays: delays,
		Policy:     webhooks.Policy{AllowLoopback: true},
		Logger:     quiet(),
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(50 * time.Millisecond)},
		StatsEvery: 50 * time.Millisecond,
		Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("deliverer: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("deliverer did not stop")
		}
	})
}

// deadLetters reads the dead-letter topic: event id -> headers.
func (e *env) deadLetters(t testing.TB) map[string]map[string]string {
	t.Helper()
	cl, err := kafka.NewClient([]string{e.broker}, kgo.ConsumeTopics(topics.WebhookDead.Name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string]map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out
		}
		fs.EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			out[h["event_id"]] = h
		})
	}
}

func orderID(i int) string { return fmt.Sprintf("ord_%d_%d", time.Now().UnixNano()%1e6, i) }

// scaled are compressed retry delays: 100 ms, 200 ms, ... for the nine steps.
func scaled(unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(webhookdelivery.Schedule))
	for i := range out {
		out[i] = time.Duration(i+1) * unit
	}
	return out
}
