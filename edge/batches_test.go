package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/acceptance"
	"rental/infra/accounts"
	"rental/processors/batchflow"
	"rental/schemas/scopes"
)

// The batch tests run the real edge (signed requests, Postgres, Redis), the order module
// with the fixed price snapshot of orders_test.go (energy 1h: 60.00 SUN per unit from own
// stock; activation 1,100,000 SUN), the node simulator over HTTP, and the batch processor
// (processors/batchflow) placing orders through the same order module. Fresh receivers are
// not activated: a batch with activate = true pays 600,000 + 1,100,000 = 1,700,000 SUN per
// receiver of 10,000 energy for 1h.

const perReceiverSun = 600_000 + testActivationSun

type batchesEnv struct {
	*ordersEnv
	batches *Batches
	key     accounts.CreatedKey
}

func newBatchesEnv(t *testing.T, opt func(*BatchesOptions), orderOpt ...func(*acceptance.Options)) *batchesEnv {
	t.Helper()
	be := &batchesEnv{}
	var oopt func(*acceptance.Options)
	if len(orderOpt) > 0 {
		oopt = orderOpt[0]
	}
	be.ordersEnv = newOrdersEnv(t, oopt, func(oe *ordersEnv, o *Options) {
		bo := BatchesOptions{Acceptance: oe.accept, Pool: oe.pg, Idempotency: oe.idem}
		if opt != nil {
			opt(&bo)
		}
		var err error
		if be.batches, err = NewBatches(bo); err != nil {
			t.Fatal(err)
		}
		o.Modules = append(o.Modules, be.batches)
	})
	be.key = be.key0(t)
	return be
}

func (be *batchesEnv) key0(t *testing.T) accounts.CreatedKey {
	return be.ordersEnv.key(t, scopes.BatchesWrite, scopes.BatchesRead, scopes.OrdersRead)
}

// receivers returns n fresh (never activated) addresses.
func receivers(t *testing.T, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = randomAddress(t).String()
	}
	return out
}

// batchJSON is a body of energy 1h, 10,000 per receiver, activate true.
func batchJSON(clientID string, addrs []string, extra map[string]any) string {
	rs := make([]map[string]any, len(addrs))
	for i, a := range addrs {
		rs[i] = map[string]any{"receiver": a}
	}
	m := map[string]any{"resource": "energy", "tier": "1h", "amount": 10_000, "activate": true, "receivers": rs}
	if clientID != "" {
		m["client_batch_id"] = clientID
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (be *batchesEnv) post(t *testing.T, body string, header ...string) response {
	t.Helper()
	return be.signed(t, be.key, "POST", "/v1/batches", body, header...)
}

func (be *batchesEnv) get(t *testing.T, id string) response {
	t.Helper()
	return be.signed(t, be.key, "GET", "/v1/batches/"+id, "")
}

// batchRow reads the batch record through GET.
type batchRecord struct {
	ID               string         `json:"id"`
	ClientBatchID    string         `json:"client_batch_id"`
	Status           string         `json:"status"`
	Summary          map[string]int `json:"summary"`
	ChargedAmountSun int64          `json:"charged_amount_sun"`
	FinishedAt       *string        `json:"finished_at"`
	Receivers        []struct {
		Index    int     `json:"index"`
		Receiver string  `json:"receiver"`
		Amount   int64   `json:"amount"`
		Status   string  `json:"status"`
		OrderID  *string `json:"order_id"`
		Charged  int64   `json:"charged_amount_sun"`
		Error    *struct {
			Code    int            `json:"code"`
			Slug    string         `json:"slug"`
			Details map[string]any `json:"details"`
		} `json:"error"`
	} `json:"receivers"`
}

func (be *batchesEnv) record(t *testing.T, id string) batchRecord {
	t.Helper()
	r := be.get(t, id)
	if r.status != 200 {
		t.Fatalf("GET batch %s: %d %s", id, r.status, r.body)
	}
	var b batchRecord
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// startProcessor runs one batch processor replica; stop cancels its context abruptly (a
// transaction in progress rolls back, as when the process dies) and waits for it.
func (be *batchesEnv) startProcessor(t *testing.T, workers int, placeEvery time.Duration) (stop func()) {
	t.Helper()
	f, err := batchflow.New(batchflow.Options{Pool: be.db.Pool, Placer: be.accept, Workers: workers,
		PollEvery: 20 * time.Millisecond, PlaceEvery: placeEvery, SweepEvery: 200 * time.Millisecond,
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, batchflow.RunOptions{}) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("batch processor: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (be *batchesEnv) waitNoPending(t *testing.T, id string, within time.Duration) batchRecord {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if be.count(t, `SELECT count(*) FROM batch_receivers WHERE batch_id = $1 AND state = 'pending'`, id) == 0 {
			return be.record(t, id)
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s still has pending receivers after %s", id, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every refusal the spec names for batch creation, and the order-creation checks applied to
// each receiver; none stores or charges anything.
func TestBatchCreateValidation(t *testing.T) {
	be := newBatchesEnv(t, func(o *BatchesOptions) { o.MaxReceivers = 10; o.MaxTotalEnergy = 1_000_000 })
	be.fund(t, be.acct.ID, 100_000_000)
	rs := receivers(t, 11)
	energy := func(amount int64, addrs ...string) string {
		return batchJSON("b-energy", addrs, map[string]any{"amount": amount})
	}
	cases := []struct {
		name        string
		body        string
		header      []string
		status      int
		code        float64
		field       any
		details     map[string]any
		contentType string
	}{
		{name: "no key at all", body: batchJSON("", rs[:2], nil), status: 400, code: 2005, field: "client_batch_id"},
		{name: "malformed Idempotency-Key", body: batchJSON("", rs[:2], nil), header: []string{"Idempotency-Key", "short"}, status: 400, code: 2001,
			field: "Idempotency-Key", details: map[string]any{"constraint": "format"}},
		{name: "bad client_batch_id", body: batchJSON("has space", rs[:2], nil), status: 400, code: 2001, field: "client_batch_id"},
		{name: "above the account's max_batch_receivers", body: batchJSON("b-11", rs[:11], nil), status: 400, code: 2009, field: "receivers",
			details: map[string]any{"max_receivers": 10.0, "receivers": 11.0, "limit": "max_batch_receivers"}},
		{name: "above the total-energy cap", body: energy(400_000, rs[:3]...), status: 400, code: 2009, field: "receivers",
			details: map[string]any{"max_total_energy": 1_000_000.0, "total_energy": 1_200_000.0, "limit": "max_batch_energy"}},
		{name: "repeated receiver", body: batchJSON("b-dup", []string{rs[0], rs[1], rs[0]}, nil), status: 400, code: 2006,
			field: "receivers[2].receiver", details: map[string]any{"receiver": rs[0], "indexes": []any{0.0, 2.0}}},
		{name: "invalid address", body: batchJSON("b-addr", []string{rs[0], "TNotAnAddress"}, nil), status: 400, code: 2007,
			field: "receivers[1].receiver", details: map[string]any{"index": 1.0}},
		{name: "hex address", body: batchJSON("b-hex", []string{"41" + strings.Repeat("ab", 20)}, nil), status: 400, code: 2007,
			field: "receivers[0].receiver"},
		{name: "receiver is ours", body: batchJSON("b-ours", []string{rs[0], be.pool.String()}, nil), status: 422, code: 3003,
			field: "receivers[1].receiver", details: map[string]any{"index": 1.0}},
		{name: "tier switched off", body: batchJSON("b-1d", rs[:1], map[string]any{"tier": "1d"}), status: 422, code: 2003, field: "tier",
			details: map[string]any{"available_tiers": []any{"5m", "1h"}}},
		{name: "tier not in the enum", body: batchJSON("b-2h", rs[:1], map[string]any{"tier": "2h"}), status: 400, code: 2001, field: "tier"},
		{name: "amount below the row minimum", body: energy(5_000, rs[:2]...), status: 400, code: 2008, field: "amount",
			details: map[string]any{"min_amount": 10_000.0, "index": 0.0}},
		{name: "activation batch", body: batchJSON("b-act", rs[:1], map[string]any{"resource": "activation"}), status: 400, code: 2001, field: "resource"},
		{name: "no receivers", body: batchJSON("b-none", nil, nil), status: 400, code: 2001, field: "receivers"},
		{name: "no amount anywhere", body: batchJSON("b-noamt", rs[:1], map[string]any{"amount": nil}), status: 400, code: 2001, field: "receivers[0].amount"},
		{name: "negative max_price_sun", body: batchJSON("b-neg", rs[:1], map[string]any{"max_price_sun": -1}), status: 400, code: 2001, field: "max_price_sun"},
		{name: "unknown field", body: batchJSON("b-unk", rs[:1], map[string]any{"receiverz": 1}), status: 400, code: 2001, field: "receiverz"},
		{name: "malformed JSON", body: `{"client_batch_id": "x",`, status: 400, code: 2000, field: nil},
	}
	for _, c := range cases {
		r := be.post(t, c.body, c.header...)
		e := envelopeOf(t, r)
		if r.status != c.status || e["code"] != c.code || e["field"] != c.field {
			t.Errorf("%s: HTTP %d code %v field %v, want %d %v %v: %s", c.name, r.status, e["code"], e["field"], c.status, c.code, c.field, r.body)
			continue
		}
		checkDetails(t, c.name, e, c.details)
	}
	// 101 receivers is above the spec's limit even when the account's limit is not set.
	be2 := newBatchesEnv(t, nil)
	wantError(t, be2.post(t, batchJSON("b-101", receivers(t, 101), nil)), 400, 2009, "batch_too_large", "receivers")
	if n := be.count(t, `SELECT count(*) FROM batches`) + be.count(t, `SELECT count(*) FROM batch_receivers`) +
		be.count(t, `SELECT count(*) FROM idempotency_keys WHERE namespace = 'batch'`) + be.count(t, `SELECT count(*) FROM ledger_holds`); n != 0 {
		t.Fatalf("refused batches stored %d rows", n)
	}
}

// Creation stores the batch and its pending receivers and charges nothing; a repeat is the
// original answer with 200, another batch under the same key is 3010; an Idempotency-Key
// header stands in for client_batch_id; GET answers the record and hides other accounts'.
func TestBatchCreateIdempotentAndGet(t *testing.T) {
	be := newBatchesEnv(t, nil)
	rs := receivers(t, 3)
	body := batchJSON("payroll-1", rs, map[string]any{"receivers": []map[string]any{
		{"receiver": rs[0]}, {"receiver": rs[1], "amount": 20_000}, {"receiver": rs[2], "activate": false}}})
	r := be.post(t, body)
	checkFields(t, r, 201, map[string]any{"client_batch_id": "payroll-1", "status": "processing", "resource": "energy", "tier": "1h",
		"amount": 10_000.0, "activate": true, "max_price_sun": nil, "charged_amount_sun": 0.0, "finished_at": nil,
		"summary": map[string]any{"total": 3.0, "completed": 0.0, "partial": 0.0, "failed": 0.0, "insufficient_funds": 0.0, "cancelled": 0.0}})
	id := r.json["id"].(string)
	if !batchIDPattern.MatchString(id) {
		t.Fatalf("id %q", id)
	}
	rcv := r.json["receivers"].([]any)
	wantAmounts := []float64{10_000, 20_000, 10_000}
	wantActivate := []bool{true, true, false}
	for i, x := range rcv {
		m := x.(map[string]any)
		if m["index"] != float64(i) || m["receiver"] != rs[i] || m["amount"] != wantAmounts[i] || m["activate"] != wantActivate[i] ||
			m["status"] != "pending" || m["order_id"] != nil || m["error"] != nil {
			t.Errorf("receiver %d: %v", i, m)
		}
	}
	if s := be.summary(t, be.acct.ID); s.ReservedSun != 0 || s.OrdersCreated != 0 {
		t.Fatalf("creation charged: %+v", s)
	}
	// A repeat with other formatting: the same body, 200.
	again := strings.ReplaceAll(body, ",", ", ")
	a := be.post(t, again)
	if a.status != 200 || string(a.body) != string(r.body) || a.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %s", a.status, a.body)
	}
	e := wantError(t, be.post(t, strings.Replace(body, "20000", "20001", 1)), 409, 3010, "idempotency_conflict", nil)
	checkDetails(t, "3010", e, map[string]any{"original_id": id})
	if n := be.count(t, `SELECT count(*) FROM batches`); n != 1 {
		t.Fatalf("%d batches", n)
	}
	// GET: the record as stored.
	g := be.get(t, id)
	if g.status != 200 || string(g.body) != string(r.body) {
		t.Fatalf("GET %d %s\nPOST %s", g.status, g.body, r.body)
	}
	// Another account's key sees no such batch; nor does a malformed id.
	other := be.keyFor(t, be.newAccount(t).ID, accounts.NewKey{Scopes: []string{scopes.BatchesRead}})
	wantError(t, be.signed(t, other, "GET", "/v1/batches/"+id, ""), 404, 3001, "order_not_found", "id")
	wantError(t, be.get(t, "bat_nothex"), 404, 3001, "order_not_found", "id")
	wantError(t, be.get(t, "bat_0123456789abcdef01234567"), 404, 3001, "order_not_found", "id")

	// The Idempotency-Key header as the key: it becomes the client_batch_id.
	hb := batchJSON("", receivers(t, 2), nil)
	h1 := be.post(t, hb, "Idempotency-Key", "hdr-key-0001")
	checkFields(t, h1, 201, map[string]any{"client_batch_id": "hdr-key-0001"})
	h2 := be.post(t, hb, "Idempotency-Key", "hdr-key-0001")
	if h2.status != 200 || string(h2.body) != string(h1.body) {
		t.Fatalf("header repeat: %d %s", h2.status, h2.body)
	}
	if n := be.count(t, `SELECT count(*) FROM batches`); n != 2 {
		t.Fatalf("%d batches", n)
	}
}

// Concurrent duplicates of one batch: one batch is stored; every answer is the batch (201
// once, 200 replays) or 3015 while the first still runs.
func TestBatchConcurrentDuplicates(t *testing.T) {
	be := newBatchesEnv(t, nil)
	body := batchJSON("dup-race", receivers(t, 50), nil)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		bodies = map[string]int{}
		codes  = map[int]int{}
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := be.post(t, body)
			mu.Lock()
			defer mu.Unlock()
			codes[r.status]++
			if r.status == 200 || r.status == 201 {
				bodies[string(r.body)]++
			} else if e := envelopeOf(t, r); e["code"] != 3015.0 {
				t.Errorf("duplicate answered %d %s", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	if codes[201] != 1 || len(bodies) != 1 {
		t.Fatalf("answers %v, %d distinct bodies", codes, len(bodies))
	}
	if n := be.count(t, `SELECT count(*) FROM batches`); n != 1 {
		t.Fatalf("%d batches stored", n)
	}
	if n := be.count(t, `SELECT count(*) FROM batch_receivers`); n != 50 {
		t.Fatalf("%d receivers stored", n)
	}
}

// An account may have MaxOpen batches processing; the next is 1101 until one ends.
func TestBatchOpenLimit(t *testing.T) {
	be := newBatchesEnv(t, func(o *BatchesOptions) { o.MaxOpen = 2 })
	var ids []string
	for i := range 2 {
		r := be.post(t, batchJSON(fmt.Sprintf("open-%d", i), receivers(t, 1), nil))
		checkFields(t, r, 201, nil)
		ids = append(ids, r.json["id"].(string))
	}
	r := be.post(t, batchJSON("open-2", receivers(t, 1), nil))
	e := wantError(t, r, 429, 1101, "concurrency_limited", nil)
	checkDetails(t, "1101", e, map[string]any{"limit": 2.0, "in_flight": 2.0})
	if r.header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	// Cancelling one ends it; then there is room again.
	checkFields(t, be.signed(t, be.key, "POST", "/v1/batches/"+ids[0]+"/cancel", ""), 200, map[string]any{"status": "cancelled"})
	checkFields(t, be.post(t, batchJSON("open-2", receivers(t, 1), nil)), 201, nil)
}

// batchCompleted returns the batch.completed events the outbox holds for the batch.
func (be *batchesEnv) batchCompleted(t *testing.T, id string) []map[string]any {
	t.Helper()
	rows, err := be.db.Pool.Query(context.Background(), `SELECT value FROM outbox WHERE topic = 'events.batches.v1' AND key = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var env map[string]any
		if err := json.Unmarshal(raw, &env); err != nil {
			t.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

// Cancel before pick-up: named receivers, then the rest, which ends the batch with one
// batch.completed; a finished batch is 3009.
func TestBatchCancelBeforePickup(t *testing.T) {
	be := newBatchesEnv(t, nil)
	rs := receivers(t, 3)
	id := be.post(t, batchJSON("cancel-1", rs, nil)).json["id"].(string)
	cancel := func(body string) response {
		return be.signed(t, be.key, "POST", "/v1/batches/"+id+"/cancel", body)
	}
	// Not receivers of the batch: 2001, nothing cancelled.
	stranger := receivers(t, 1)[0]
	e := wantError(t, cancel(`{"receivers":["`+stranger+`"]}`), 400, 2001, "validation_failed", "receivers")
	checkDetails(t, "not in batch", e, map[string]any{"constraint": "not_in_batch", "receivers": []any{stranger}})
	wantError(t, cancel(`{"receivers":["`+rs[0]+`","`+rs[0]+`"]}`), 400, 2006, "duplicate_receiver", "receivers[1]")

	r := cancel(`{"receivers":["` + rs[1] + `"]}`)
	checkFields(t, r, 200, map[string]any{"status": "processing",
		"summary": map[string]any{"total": 3.0, "completed": 0.0, "partial": 0.0, "failed": 0.0, "insufficient_funds": 0.0, "cancelled": 1.0}})
	if st := be.record(t, id).Receivers; st[0].Status != "pending" || st[1].Status != "cancelled" || st[2].Status != "pending" {
		t.Fatalf("receivers %+v", st)
	}
	if n := len(be.batchCompleted(t, id)); n != 0 {
		t.Fatalf("%d batch.completed while receivers are pending", n)
	}
	// Cancelling a cancelled receiver: it is not pending any more (3002, naming it).
	e = wantError(t, cancel(`{"receivers":["`+rs[1]+`","`+rs[2]+`"]}`), 409, 3002, "order_not_cancellable", "receivers")
	checkDetails(t, "3002", e, map[string]any{"receivers": []any{rs[1]}})
	if st := be.record(t, id).Receivers; st[2].Status != "pending" {
		t.Fatal("a refused cancel cancelled a receiver")
	}

	// No body: every pending receiver; the batch ends cancelled.
	r = cancel("")
	checkFields(t, r, 200, map[string]any{"status": "cancelled", "charged_amount_sun": 0.0,
		"summary": map[string]any{"total": 3.0, "completed": 0.0, "partial": 0.0, "failed": 0.0, "insufficient_funds": 0.0, "cancelled": 3.0}})
	if r.json["finished_at"] == nil {
		t.Fatal("finished batch without finished_at")
	}
	evs := be.batchCompleted(t, id)
	if len(evs) != 1 {
		t.Fatalf("%d batch.completed events", len(evs))
	}
	ev := evs[0]
	if ev["event"] != "batch.completed" || ev["event_version"] != 1.0 || ev["account_id"] != be.acct.ID || ev["network"] != "nile" || ev["test"] != false {
		t.Fatalf("envelope %v", ev)
	}
	data := ev["data"].(map[string]any)
	want := map[string]any{"batch_id": id, "client_batch_id": "cancel-1", "status": "cancelled", "charged_amount_sun": 0.0,
		"finished_at": r.json["finished_at"],
		"summary":     map[string]any{"total": 3.0, "completed": 0.0, "partial": 0.0, "failed": 0.0, "insufficient_funds": 0.0, "cancelled": 3.0}}
	if len(data) != len(want) {
		t.Fatalf("data %v, want exactly %v", data, want)
	}
	for k, v := range want {
		if !equalJSON(data[k], v) {
			t.Errorf("data.%s = %v, want %v", k, data[k], v)
		}
	}
	// Finished: 3009 with its status; no second event.
	e = wantError(t, cancel(""), 409, 3009, "order_in_terminal_state", nil)
	checkDetails(t, "3009", e, map[string]any{"status": "cancelled"})
	if n := len(be.batchCompleted(t, id)); n != 1 {
		t.Fatalf("%d batch.completed events after a second cancel", n)
	}
	// Another account cannot cancel it.
	other := be.keyFor(t, be.newAccount(t).ID, accounts.NewKey{Scopes: []string{scopes.BatchesWrite}})
	wantError(t, be.signed(t, other, "POST", "/v1/batches/"+id+"/cancel", ""), 404, 3001, "order_not_found", "id")
}

// The processor places each receiver's order with the checks and charge of POST /v1/orders:
// with money for two of three receivers, two orders are charged to the SUN and the third
// receiver ends insufficient_funds with required and available amounts; receivers picked up
// cannot be cancelled (3002).
func TestBatchProcessorPlacesAndRefuses(t *testing.T) {
	be := newBatchesEnv(t, nil)
	be.fund(t, be.acct.ID, 2*perReceiverSun+1_000_000)
	rs := receivers(t, 3)
	id := be.post(t, batchJSON("pay-3", rs, nil)).json["id"].(string)
	be.startProcessor(t, 1, 0)
	b := be.waitNoPending(t, id, 15*time.Second)

	if b.Status != "processing" || b.Summary["total"] != 3 || b.Summary["insufficient_funds"] != 1 || b.Summary["failed"] != 0 {
		t.Fatalf("batch %+v", b)
	}
	for i, r := range b.Receivers[:2] {
		if r.Status != "placed" || r.OrderID == nil || r.Charged != perReceiverSun {
			t.Fatalf("receiver %d: %+v", i, r)
		}
		o := be.signed(t, be.key, "GET", "/v1/orders/"+*r.OrderID, "")
		checkFields(t, o, 200, map[string]any{"batch_id": id, "client_order_id": fmt.Sprintf("%s:%d", id, i), "receiver": rs[i],
			"status": "created", "amount": 10_000.0, "tier": "1h", "total_amount_sun": float64(perReceiverSun)})
	}
	last := b.Receivers[2]
	if last.Status != "insufficient_funds" || last.OrderID == nil || last.Charged != 0 || last.Error == nil || last.Error.Code != 4002 && last.Error.Code != 4001 {
		t.Fatalf("third receiver %+v", last)
	}
	// Its order is failed with the refusal, and charged nothing.
	refused := be.signed(t, be.key, "GET", "/v1/orders/"+*last.OrderID, "")
	checkFields(t, refused, 200, map[string]any{"batch_id": id, "client_order_id": fmt.Sprintf("%s:2", id), "status": "failed",
		"charged_amount_sun": 0.0, "refunded_amount_sun": 0.0})
	if f := refused.json["failure"].(map[string]any); f["code"] != float64(last.Error.Code) {
		t.Fatalf("refused order failure %v", f)
	}
	if last.Error.Details["required_sun"] != float64(perReceiverSun) || last.Error.Details["available_sun"] != 1_000_000.0 {
		t.Fatalf("refusal details %v", last.Error.Details)
	}
	s := be.summary(t, be.acct.ID)
	if s.BalanceSun != 2*perReceiverSun+1_000_000 || s.ReservedSun != 2*perReceiverSun || s.OrdersCreated != 2 {
		t.Fatalf("ledger %+v", s)
	}
	if b.ChargedAmountSun != 2*perReceiverSun {
		t.Fatalf("charged_amount_sun %d", b.ChargedAmountSun)
	}
	list := be.signed(t, be.key, "GET", "/v1/orders?batch_id="+id, "")
	if list.status != 200 || len(list.json["data"].([]any)) != 3 {
		t.Fatalf("GET /v1/orders?batch_id: %d %s", list.status, list.body)
	}
	// Picked up: not cancellable, and nothing is left pending.
	e := wantError(t, be.signed(t, be.key, "POST", "/v1/batches/"+id+"/cancel", `{"receivers":["`+rs[0]+`"]}`), 409, 3002, "order_not_cancellable", "receivers")
	checkDetails(t, "3002 named", e, map[string]any{"receivers": []any{rs[0]}})
	e = wantError(t, be.signed(t, be.key, "POST", "/v1/batches/"+id+"/cancel", ""), 409, 3002, "order_not_cancellable", nil)
	checkDetails(t, "3002 none pending", e, map[string]any{"pending": 0.0})
	be.checkInvariants(t)
}

// checkOnce asserts each receiver of the batch got exactly one order, for its own address,
// charged once: orders, holds and the account's reserved amount all agree.
func (be *batchesEnv) checkOnce(t *testing.T, id string, rs []string) {
	t.Helper()
	b := be.record(t, id)
	seen := map[string]bool{}
	for i, r := range b.Receivers {
		if r.Status != "placed" || r.OrderID == nil || r.Receiver != rs[i] {
			t.Fatalf("receiver %d: %+v", i, r)
		}
		if seen[*r.OrderID] {
			t.Fatalf("order %s recorded twice", *r.OrderID)
		}
		seen[*r.OrderID] = true
	}
	n := len(rs)
	if got := be.count(t, `SELECT count(*) FROM orders WHERE batch_id = $1`, id); got != n {
		t.Fatalf("%d orders for %d receivers", got, n)
	}
	if got := be.count(t, `SELECT count(DISTINCT client_order_id) FROM orders WHERE batch_id = $1`, id); got != n {
		t.Fatalf("%d distinct client_order_ids for %d receivers", got, n)
	}
	if got := be.count(t, `SELECT count(*) FROM orders o JOIN batch_receivers r ON r.order_id = o.id AND r.receiver = o.receiver
		WHERE o.batch_id = $1 AND o.client_order_id = r.batch_id || ':' || r.idx`, id); got != n {
		t.Fatalf("%d orders match their receiver row", got)
	}
	if got := be.count(t, `SELECT count(*) FROM ledger_holds h JOIN orders o ON o.id = h.ref WHERE o.batch_id = $1`, id); got != n {
		t.Fatalf("%d holds for %d orders", got, n)
	}
	if s := be.summary(t, be.acct.ID); s.ReservedSun != int64(n)*perReceiverSun || s.OrdersCreated != int64(n) {
		t.Fatalf("ledger %+v, want %d reserved for %d orders", s, int64(n)*perReceiverSun, n)
	}
	be.checkInvariants(t)
}

// Two replicas over one larger batch share it and place each receiver exactly once.
func TestBatchProcessorReplicasPlaceEachReceiverOnce(t *testing.T) {
	be := newBatchesEnv(t, nil)
	be.fund(t, be.acct.ID, 1_000*perReceiverSun)
	rs := receivers(t, 80)
	id := be.post(t, batchJSON("replicas", rs, nil)).json["id"].(string)
	be.startProcessor(t, 4, 0)
	be.startProcessor(t, 4, 0)
	be.waitNoPending(t, id, 60*time.Second)
	be.checkOnce(t, id, rs)
}

// A replica stopped abruptly mid-batch (its context cancelled inside placements, so the
// transaction in progress rolls back) and a new one started: every receiver is placed
// exactly once.
func TestBatchProcessorStoppedMidBatchPlacesEachOnce(t *testing.T) {
	be := newBatchesEnv(t, nil)
	be.fund(t, be.acct.ID, 1_000*perReceiverSun)
	rs := receivers(t, 40)
	id := be.post(t, batchJSON("crash", rs, nil)).json["id"].(string)
	stop := be.startProcessor(t, 2, 20*time.Millisecond)
	deadline := time.Now().Add(20 * time.Second)
	for be.count(t, `SELECT count(*) FROM batch_receivers WHERE batch_id = $1 AND state = 'placed'`, id) < 10 {
		if time.Now().After(deadline) {
			t.Fatal("the processor placed fewer than 10 receivers")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	pending := be.count(t, `SELECT count(*) FROM batch_receivers WHERE batch_id = $1 AND state = 'pending'`, id)
	if pending == 0 {
		t.Fatal("the batch finished placing before the stop; the test did not stop it mid-batch")
	}
	t.Logf("stopped with %d of %d receivers pending", pending, len(rs))
	be.startProcessor(t, 2, 0)
	be.waitNoPending(t, id, 30*time.Second)
	be.checkOnce(t, id, rs)
}

// The account's in-flight limit (1101) holds a receiver back instead of failing it: it
// stays pending, is tried again, and can still be cancelled.
func TestBatchReceiverAtTheInFlightLimitWaits(t *testing.T) {
	be := newBatchesEnv(t, nil, func(o *acceptance.Options) { o.MaxInFlight = 2 })
	be.fund(t, be.acct.ID, 100*perReceiverSun)
	rs := receivers(t, 4)
	id := be.post(t, batchJSON("inflight", rs, nil)).json["id"].(string)
	be.startProcessor(t, 1, 0)
	deadline := time.Now().Add(15 * time.Second)
	for be.count(t, `SELECT count(*) FROM batch_receivers WHERE batch_id = $1 AND state = 'pending' AND attempts >= 2`, id) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("receivers beyond the in-flight limit were not retried: %+v", be.record(t, id).Receivers)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b := be.record(t, id)
	if b.Summary["failed"] != 0 || b.Receivers[0].Status != "placed" || b.Receivers[1].Status != "placed" ||
		b.Receivers[2].Status != "pending" || b.Receivers[3].Status != "pending" {
		t.Fatalf("receivers %+v", b.Receivers)
	}
	r := be.signed(t, be.key, "POST", "/v1/batches/"+id+"/cancel", "")
	checkFields(t, r, 200, map[string]any{"status": "processing"})
	if b := be.record(t, id); b.Summary["cancelled"] != 2 || b.Receivers[2].Status != "cancelled" || b.Receivers[3].Status != "cancelled" {
		t.Fatalf("after cancel %+v", b)
	}
	if n := be.count(t, `SELECT count(*) FROM orders WHERE batch_id = $1`, id); n != 2 {
		t.Fatalf("%d orders", n)
	}
}

// Without fresh prices (the pricer stopped: 5003) receivers wait instead of failing, and
// are placed once prices are back.
func TestBatchWaitsOutAPricingOutage(t *testing.T) {
	be := newBatchesEnv(t, nil)
	be.fund(t, be.acct.ID, 10*perReceiverSun)
	rs := receivers(t, 2)
	id := be.post(t, batchJSON("outage", rs, nil)).json["id"].(string)
	be.clock.add(2 * time.Minute) // past the snapshot's valid_until
	be.startProcessor(t, 1, 0)
	deadline := time.Now().Add(15 * time.Second)
	for be.count(t, `SELECT count(*) FROM batch_receivers WHERE batch_id = $1 AND state = 'pending' AND attempts >= 1`, id) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no placement attempt met the outage: %+v", be.record(t, id).Receivers)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b := be.record(t, id); b.Summary["failed"] != 0 || b.Receivers[0].Status != "pending" {
		t.Fatalf("during the outage %+v", b)
	}
	be.clock.add(-2 * time.Minute)
	b := be.waitNoPending(t, id, 15*time.Second)
	if b.Receivers[0].Status != "placed" || b.Receivers[1].Status != "placed" {
		t.Fatalf("after the outage %+v", b.Receivers)
	}
}

// Receivers refused for reasons of the moment (here 3004: never activated, and the batch
// did not ask to activate) fail with the order error; when nothing is delivered the batch
// ends failed at once, with one batch.completed charging nothing.
func TestBatchOfRefusedReceiversEndsFailed(t *testing.T) {
	be := newBatchesEnv(t, nil)
	be.fund(t, be.acct.ID, 100*perReceiverSun)
	rs := receivers(t, 2)
	id := be.post(t, batchJSON("refused", rs, map[string]any{"activate": false})).json["id"].(string)
	be.startProcessor(t, 2, 0)
	deadline := time.Now().Add(15 * time.Second)
	var b batchRecord
	for b = be.record(t, id); b.Status == "processing"; b = be.record(t, id) {
		if time.Now().After(deadline) {
			t.Fatalf("batch still processing: %+v", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b.Status != "failed" || b.Summary["failed"] != 2 || b.ChargedAmountSun != 0 || b.FinishedAt == nil {
		t.Fatalf("batch %+v", b)
	}
	for i, r := range b.Receivers {
		if r.Status != "failed" || r.OrderID == nil || r.Charged != 0 || r.Error == nil || r.Error.Code != 3004 || r.Error.Slug != "receiver_not_activated" ||
			r.Error.Details["activate_amount_sun"] != float64(testActivationSun) {
			t.Fatalf("receiver %d: %+v", i, r)
		}
	}
	evs := be.batchCompleted(t, id)
	if len(evs) != 1 {
		t.Fatalf("%d batch.completed", len(evs))
	}
	if d := evs[0]["data"].(map[string]any); d["status"] != "failed" || d["charged_amount_sun"] != 0.0 {
		t.Fatalf("batch.completed data %v", d)
	}
	if s := be.summary(t, be.acct.ID); s.ReservedSun != 0 || s.OrdersCreated != 0 {
		t.Fatalf("refusals charged: %+v", s)
	}
}

// A batch of an account suspended after creation places nothing: its receivers fail with
// 1008, as every order of the account would.
func TestBatchOfASuspendedAccountPlacesNothing(t *testing.T) {
	be := newBatchesEnv(t, nil)
	be.fund(t, be.acct.ID, 100*perReceiverSun)
	id := be.post(t, batchJSON("suspended", receivers(t, 2), nil)).json["id"].(string)
	if err := be.store.SetStatus(context.Background(), be.acct.ID, accounts.StatusSuspended); err != nil {
		t.Fatal(err)
	}
	be.startProcessor(t, 1, 0)
	be.waitNoPending(t, id, 15*time.Second)
	var status string
	if err := be.db.Pool.QueryRow(context.Background(), `SELECT status FROM batches WHERE id = $1`, id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "failed" {
		t.Fatalf("batch %s", status)
	}
	if n := be.count(t, `SELECT count(*) FROM batch_receivers WHERE batch_id = $1 AND state = 'failed' AND (error->>'code')::int = 1008`, id); n != 2 {
		t.Fatalf("%d receivers failed with 1008", n)
	}
	// Each receiver's order is failed with 1008 and charged nothing (N order events for N
	// receivers); none was placed.
	if n := be.count(t, `SELECT count(*) FROM orders WHERE batch_id = $1 AND (status <> 'failed' OR charged_amount_sun <> 0
			OR (failure->>'code')::int <> 1008)`, id); n != 0 {
		t.Fatalf("%d orders placed for a suspended account", n)
	}
	if n := be.count(t, `SELECT count(*) FROM outbox WHERE topic = 'events.orders.v1' AND key IN (SELECT id FROM orders WHERE batch_id = $1)
			AND convert_from(value, 'UTF8')::jsonb->>'event' = 'order.failed'`, id); n != 2 {
		t.Fatalf("%d order.failed events for two refused receivers", n)
	}
}

// A cancel racing the processor: every receiver ends either placed (with one order) or
// cancelled (with none), the cancel's answer matches what was cancelled, and the batch's
// open-receiver counter agrees with its rows.
func TestBatchCancelRacingThePlacements(t *testing.T) {
	be := newBatchesEnv(t, nil)
	be.fund(t, be.acct.ID, 1_000*perReceiverSun)
	rs := receivers(t, 40)
	id := be.post(t, batchJSON("race", rs, nil)).json["id"].(string)
	be.startProcessor(t, 2, 10*time.Millisecond)
	be.startProcessor(t, 2, 10*time.Millisecond)
	deadline := time.Now().Add(20 * time.Second)
	for be.count(t, `SELECT count(*) FROM batch_receivers WHERE batch_id = $1 AND state = 'placed'`, id) < 5 {
		if time.Now().After(deadline) {
			t.Fatal("fewer than 5 receivers placed")
		}
		time.Sleep(2 * time.Millisecond)
	}
	r := be.signed(t, be.key, "POST", "/v1/batches/"+id+"/cancel", "")
	checkFields(t, r, 200, nil)
	cancelled := int(r.json["summary"].(map[string]any)["cancelled"].(float64))
	b := be.waitNoPending(t, id, 15*time.Second)
	placed := 0
	for i, rc := range b.Receivers {
		switch {
		case rc.Status == "placed" && rc.OrderID != nil:
			placed++
		case rc.Status == "cancelled" && rc.OrderID == nil:
		default:
			t.Fatalf("receiver %d: %+v", i, rc)
		}
	}
	if cancelled == 0 || placed+cancelled != len(rs) || b.Summary["cancelled"] != cancelled {
		t.Fatalf("%d placed, %d cancelled by the answer, summary %v", placed, cancelled, b.Summary)
	}
	if n := be.count(t, `SELECT count(*) FROM orders WHERE batch_id = $1`, id); n != placed {
		t.Fatalf("%d orders for %d placed receivers", n, placed)
	}
	if n := be.count(t, `SELECT open_receivers FROM batches WHERE id = $1`, id); n != placed {
		t.Fatalf("open_receivers %d, %d receivers still open", n, placed)
	}
	t.Logf("%d placed, %d cancelled", placed, cancelled)
}
