package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/client"
	"rental/schemas/events"
	"rental/schemas/topics"
)

// Batches through the whole dev stack (docs/batches.md): the edge stores the batch, the
// batch processor places one order per receiver with the checks and charge of
// POST /v1/orders, the order processor delivers them on the simulated chain, and the batch
// processor learns each outcome from events.orders.v1 and ends the batch with one
// batch.completed on events.batches.v1.

type batchRecord struct {
	ID               string         `json:"id"`
	ClientBatchID    string         `json:"client_batch_id"`
	Status           string         `json:"status"`
	Summary          map[string]int `json:"summary"`
	ChargedAmountSun int64          `json:"charged_amount_sun"`
	FinishedAt       *string        `json:"finished_at"`
	Receivers        []struct {
		Receiver string  `json:"receiver"`
		Status   string  `json:"status"`
		OrderID  *string `json:"order_id"`
		Error    *struct {
			Code    int              `json:"code"`
			Details map[string]int64 `json:"details"`
		} `json:"error"`
	} `json:"receivers"`
}

func (c *caller) batch(id string) batchRecord {
	c.t.Helper()
	var b batchRecord
	c.want(c.signed("GET", "/v1/batches/"+id, nil), 200, "GET /v1/batches/"+id).decode(c.t, &b)
	return b
}

// walkTotal is the public order book's price of amount energy for 5m right now.
func (c *caller) walkTotal(amount int64) int64 {
	c.t.Helper()
	var b struct {
		Walk struct {
			TotalSun int64 `json:"total_sun"`
			Complete bool  `json:"complete"`
		} `json:"walk"`
	}
	c.want(c.api("GET", fmt.Sprintf("/v1/orderbook?resource=energy&tier=5m&amount=%d", amount), nil), 200, "GET /v1/orderbook").decode(c.t, &b)
	if !b.Walk.Complete {
		c.t.Fatalf("the order book cannot fill %d energy for 5m", amount)
	}
	return b.Walk.TotalSun
}

// batchCompleted reads events.batches.v1 until the batch's batch.completed and returns its
// data; it fails unless the record is keyed by the batch id and carries exactly the spec's
// fields.
func batchCompleted(t *testing.T, s *stack, id, account string) map[string]any {
	t.Helper()
	var data map[string]any
	consume(t, s.kafk, topics.BatchEvents.Name, 20*time.Second, func(r *kgo.Record) bool {
		var env events.Envelope
		var d map[string]any
		if json.Unmarshal(r.Value, &env) != nil || json.Unmarshal(env.Data, &d) != nil || d["batch_id"] != id {
			return false
		}
		if env.Event != "batch.completed" || string(r.Key) != id || env.AccountID != account || env.EventVersion != 1 {
			t.Fatalf("batch event %s key %s account %s version %d", env.Event, r.Key, env.AccountID, env.EventVersion)
		}
		data = d
		return true
	})
	want := []string{"batch_id", "client_batch_id", "status", "summary", "charged_amount_sun", "finished_at"}
	if len(data) != len(want) {
		t.Fatalf("batch.completed data %v, want exactly %v", data, want)
	}
	for _, k := range want {
		if _, ok := data[k]; !ok {
			t.Fatalf("batch.completed data lacks %s: %v", k, data)
		}
	}
	return data
}

// outboxCount counts the batch.completed rows written for the batch: the event is written
// once at the source (the relay may publish a row again after a crash; consumers dedupe by
// event_id).
func outboxCount(t *testing.T, s *stack, id string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), s.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE topic = $1 AND key = $2`,
		topics.BatchEvents.Name, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// hookReceiver is a webhook endpoint on this machine: it answers 204 and keeps every
// delivery.
type hookReceiver struct {
	url string
	mu  sync.Mutex
	got []hookDelivery
}

type hookDelivery struct {
	header http.Header
	body   []byte
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	h := &hookReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got = append(h.got, hookDelivery{header: r.Header.Clone(), body: body})
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hooks"
	return h
}

func (h *hookReceiver) deliveries() []hookDelivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookDelivery(nil), h.got...)
}

func waitFinished(t *testing.T, c *caller, id string, within time.Duration) batchRecord {
	t.Helper()
	var b batchRecord
	took := eventually(t, within, "batch finished", func() bool { b = c.batch(id); return b.Status != "processing" })
	t.Logf("batch %s %s after %s: %v", id, b.Status, took.Round(time.Millisecond), b.Summary)
	return b
}

// A batch of four receivers, one of which the balance cannot pay: three orders are placed,
// delivered and charged to the SUN, the fourth receiver ends insufficient_funds, and the
// batch ends partial with one batch.completed carrying the counters and the charge.
func TestE2EBatchWithAnUnaffordableReceiver(t *testing.T) {
	e := e2eStack(t)
	c := e.c
	e.scopes = []string{"webhooks.write"}
	e.signup()
	// The account's webhook endpoint: a receiver on this machine (loopback targets are
	// allowed in the dev stack) that records every delivery.
	hook := newHookReceiver(t)
	var endpoint struct {
		Secret string `json:"secret"`
	}
	c.want(c.signed("POST", "/v1/webhooks", map[string]any{"url": hook.url, "events": []string{"batch.completed", "order.confirmed", "order.failed"}}),
		201, "POST /v1/webhooks").decode(t, &endpoint)
	const deposit = 20_000_000
	e.deposit(deposit)
	eventually(t, 15*time.Second, "GET /v1/prices answers 200", func() bool { return c.api("GET", "/v1/prices", nil).status == 200 })
	const small, big = 65_000, 2_000_000
	if three, one := 3*c.walkTotal(small), c.walkTotal(big); three >= deposit || one <= deposit {
		t.Fatalf("prices do not fit the test: three small orders %d SUN, the big one %d SUN, deposit %d", three, one, deposit)
	}
	rs := []string{e.newReceiver(), e.newReceiver(), e.newReceiver(), e.newReceiver()}
	body := map[string]any{"client_batch_id": "e2e-batch-1", "resource": "energy", "tier": "5m", "amount": small,
		"receivers": []map[string]any{{"receiver": rs[0]}, {"receiver": rs[1]}, {"receiver": rs[2], "amount": big}, {"receiver": rs[3]}}}
	var created batchRecord
	c.want(c.signed("POST", "/v1/batches", body), 201, "POST /v1/batches").decode(t, &created)
	if created.Status != "processing" || created.Summary["total"] != 4 || created.ClientBatchID != "e2e-batch-1" {
		t.Fatalf("201 body %+v", created)
	}
	b := waitFinished(t, c, created.ID, 60*time.Second)

	wantSummary := map[string]int{"total": 4, "completed": 3, "partial": 0, "failed": 0, "insufficient_funds": 1, "cancelled": 0}
	if b.Status != "partial" || fmt.Sprint(b.Summary) != fmt.Sprint(wantSummary) || b.FinishedAt == nil {
		t.Fatalf("finished batch %+v, want partial with %v", b, wantSummary)
	}
	refused := b.Receivers[2]
	if refused.Status != "insufficient_funds" || refused.OrderID == nil || refused.Error == nil || refused.Error.Code != 4001 ||
		refused.Error.Details["required_sun"] <= deposit {
		t.Fatalf("the unaffordable receiver: %+v", refused)
	}
	// Its order is failed with 4001, charged nothing, and sent order.failed: a batch of four
	// yields four order events.
	var ro orderRecord
	c.want(c.signed("GET", "/v1/orders/"+*refused.OrderID, nil), 200, "GET the refused order").decode(t, &ro)
	if ro.Status != "failed" || ro.TotalAmountSun != 0 || ro.RefundedAmountSun != 0 || ro.Failure == nil || ro.Failure.Code != 4001 {
		t.Fatalf("the unaffordable receiver's order: %+v", ro)
	}
	orderEvents(t, e.s, *refused.OrderID, "order.failed")
	var spent int64
	for _, i := range []int{0, 1, 3} {
		r := b.Receivers[i]
		if r.Status != "completed" || r.OrderID == nil || r.Receiver != rs[i] {
			t.Fatalf("receiver %d: %+v", i, r)
		}
		o := c.order(*r.OrderID)
		if (o.Status != "active" && o.Status != "confirmed") || o.Receiver != rs[i] || o.Amount != small || o.DeliveredAmount != small ||
			o.ClientOrderID != fmt.Sprintf("%s:%d", b.ID, i) || o.RefundedAmountSun != 0 {
			t.Fatalf("order of receiver %d: %+v", i, o)
		}
		spent += o.TotalAmountSun
		// Its order.confirmed on events.orders.v1 names the batch.
		evs := orderEvents(t, e.s, o.ID, "order.confirmed")
		var d struct {
			BatchID *string `json:"batch_id"`
		}
		if json.Unmarshal(evs[len(evs)-1].Data, &d) != nil || d.BatchID == nil || *d.BatchID != b.ID {
			t.Fatalf("order.confirmed of %s: %s", o.ID, evs[len(evs)-1].Data)
		}
	}
	if b.ChargedAmountSun != spent {
		t.Fatalf("batch charged_amount_sun %d, the orders' totals %d", b.ChargedAmountSun, spent)
	}
	c.wantBalance("after the batch", deposit-spent, 0)
	var list struct {
		Data []orderRecord `json:"data"`
	}
	c.want(c.signed("GET", "/v1/orders?batch_id="+b.ID, nil), 200, "GET /v1/orders?batch_id").decode(t, &list)
	if len(list.Data) != 4 {
		t.Fatalf("%d orders listed for the batch", len(list.Data))
	}

	data := batchCompleted(t, e.s, b.ID, e.acc)
	if data["status"] != "partial" || data["client_batch_id"] != "e2e-batch-1" || data["charged_amount_sun"] != float64(spent) ||
		data["finished_at"] != *b.FinishedAt {
		t.Fatalf("batch.completed data %v", data)
	}
	sum := data["summary"].(map[string]any)
	for k, v := range wantSummary {
		if sum[k] != float64(v) {
			t.Fatalf("batch.completed summary %v, want %v", sum, wantSummary)
		}
	}
	if n := outboxCount(t, e.s, b.ID); n != 1 {
		t.Fatalf("%d batch.completed events written", n)
	}
	// The webhook: three order.confirmed, one order.failed and the batch.completed, each signed with the
	// endpoint's secret (each order's events keep their order; the batch's is on a topic
	// of its own).
	var got []hookDelivery
	eventually(t, 30*time.Second, "webhook deliveries of the batch", func() bool {
		got = hook.deliveries()
		return len(got) >= 5
	})
	count := map[string]int{}
	verifier := client.NewWebhookVerifier(endpoint.Secret)
	for _, d := range got {
		if _, err := verifier.Verify(context.Background(), d.header, d.body); err != nil { // signature, window, event id, dedup
			t.Fatalf("delivery %s: signature: %v", d.header.Get("X-Event-Type"), err)
		}
		var env events.Envelope
		if err := json.Unmarshal(d.body, &env); err != nil || env.EventID != d.header.Get("X-Event-Id") || env.Event != d.header.Get("X-Event-Type") {
			t.Fatalf("delivery headers %v body %s (%v)", d.header, d.body, err)
		}
		count[env.Event]++
		if env.Event != "batch.completed" {
			continue
		}
		var delivered map[string]any
		if err := json.Unmarshal(env.Data, &delivered); err != nil || delivered["batch_id"] != b.ID || delivered["status"] != "partial" {
			t.Fatalf("batch.completed delivered with data %s", env.Data)
		}
	}
	if count["order.confirmed"] != 3 || count["order.failed"] != 1 || count["batch.completed"] != 1 || len(got) != 5 {
		t.Fatalf("webhook deliveries %v", count)
	}
	// Finished: a cancel is 3009.
	r := c.signed("POST", "/v1/batches/"+b.ID+"/cancel", nil)
	if r.status != 409 || !json.Valid(r.body) {
		t.Fatalf("cancel of a finished batch: %d %s", r.status, r.body)
	}
	var env struct {
		Error struct{ Code int } `json:"error"`
	}
	r.decode(t, &env)
	if env.Error.Code != 3009 {
		t.Fatalf("cancel of a finished batch: %s", r.body)
	}
}

// The dev stack killed with SIGKILL while the batch processor is placing a batch (throttled
// so the kill lands mid-batch) and started again: every receiver gets exactly one order,
// the batch completes, and batch.completed is written once. The throttle leaves about 8 s
// between the second placement and the last for the kill and the restart.
func TestE2EBatchSurvivesSIGKILLMidBatch(t *testing.T) {
	e := e2eStack(t, "BATCH_PLACE_INTERVAL=1s", "BATCH_WORKERS=1")
	c := e.c
	e.signup()
	const deposit = 100_000_000
	e.deposit(deposit)
	eventually(t, 15*time.Second, "GET /v1/prices answers 200", func() bool { return c.api("GET", "/v1/prices", nil).status == 200 })
	const n, amount = 10, 40_000
	rs := make([]map[string]any, n)
	for i := range rs {
		rs[i] = map[string]any{"receiver": e.newReceiver()}
	}
	var created batchRecord
	c.want(c.signed("POST", "/v1/batches", map[string]any{"client_batch_id": "e2e-kill", "resource": "energy", "tier": "5m",
		"amount": amount, "receivers": rs}), 201, "POST /v1/batches").decode(t, &created)
	placed := func(b batchRecord) (p, pending int) {
		for _, r := range b.Receivers {
			if r.OrderID != nil {
				p++
			}
			if r.Status == "pending" {
				pending++
			}
		}
		return
	}
	eventually(t, 30*time.Second, "two receivers placed", func() bool { p, _ := placed(c.batch(created.ID)); return p >= 2 })
	e.s.kill()
	e.s.restart()
	if p, pending := placed(c.batch(created.ID)); pending == 0 {
		t.Fatalf("the kill came after the last placement (%d placed); it did not land mid-batch", p)
	} else {
		t.Logf("killed with %d placed and %d pending", p, pending)
	}
	b := waitFinished(t, c, created.ID, 90*time.Second)
	if b.Status != "completed" || b.Summary["completed"] != n || b.Summary["total"] != n {
		t.Fatalf("batch after the restart %+v", b)
	}
	var list struct {
		Data []orderRecord `json:"data"`
	}
	c.want(c.signed("GET", "/v1/orders?batch_id="+b.ID+"&limit=200", nil), 200, "GET /v1/orders?batch_id").decode(t, &list)
	if len(list.Data) != n {
		t.Fatalf("%d orders for %d receivers", len(list.Data), n)
	}
	byReceiver := map[string]int{}
	var spent int64
	for _, o := range list.Data {
		byReceiver[o.Receiver]++
		spent += o.TotalAmountSun - o.RefundedAmountSun
	}
	for i, r := range b.Receivers {
		if byReceiver[r.Receiver] != 1 || r.Status != "completed" {
			t.Fatalf("receiver %d (%s): %d orders, status %s", i, r.Receiver, byReceiver[r.Receiver], r.Status)
		}
	}
	if b.ChargedAmountSun != spent {
		t.Fatalf("charged_amount_sun %d, orders %d", b.ChargedAmountSun, spent)
	}
	c.wantBalance("after the batch", deposit-spent, 0)
	data := batchCompleted(t, e.s, b.ID, e.acc)
	if data["status"] != "completed" || data["charged_amount_sun"] != float64(spent) {
		t.Fatalf("batch.completed data %v", data)
	}
	if k := outboxCount(t, e.s, b.ID); k != 1 {
		t.Fatalf("%d batch.completed events written", k)
	}
}
