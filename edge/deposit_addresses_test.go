package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"rental/chainwatch"
	"rental/consumers/crediting"
	"rental/infra/deposits"
	"rental/infra/kafka"
	"rental/infra/ledgerstore"
	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/apierr"
	"rental/schemas/network"
	"rental/schemas/scopes"
)

func TestDepositAddressesShapeRateAndRotation(t *testing.T) {
	var store *deposits.Store
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	policy := deposits.RotationPolicy{MinIntervalDays: 7, MaxPerWindow: 2, WindowDays: 30, RetiredCreditDays: 14}
	le := newLedgerEnv(t, func(pool *pgxpool.Pool, o *Options) {
		d, _ := deposits.NewDeriver(deposits.DevSeedHex)
		var err error
		store, err = deposits.NewStore(pool, deposits.Options{Deriver: d, USDTContract: network.Nile.USDTContract(),
			Network: network.Nile, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		m, err := NewDepositAddresses(DepositAddressesOptions{Store: store, Policy: policy,
			Rates: &deposits.CachedRate{Source: deposits.FixedRate{SunPerUSDT: 3_450_000, Now: func() time.Time { return now }}}})
		if err != nil {
			t.Fatal(err)
		}
		o.Modules = append(o.Modules, m)
	})
	k := le.key(t, scopes.DepositsRead)

	r := le.signed(t, k, "GET", "/v1/deposit-addresses", "")
	if r.status != 200 {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	data := r.json["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("data %s", r.body)
	}
	trx, usdt := data[0].(map[string]any), data[1].(map[string]any)
	for _, row := range data {
		m := row.(map[string]any)
		for _, f := range []string{"currency", "address", "memo", "confirmations_required", "contract", "rate_now", "spread_bps", "min", "max"} {
			if _, ok := m[f]; !ok {
				t.Errorf("row lacks %s: %v", f, m)
			}
		}
	}
	if trx["currency"] != "TRX" || trx["contract"] != nil || trx["rate_now"] != nil || trx["memo"] != nil || trx["address"] != usdt["address"] {
		t.Errorf("TRX row %v", trx)
	}
	rate, _ := usdt["rate_now"].(map[string]any)
	if usdt["currency"] != "USDT" || usdt["contract"] != network.Nile.USDTContract() || usdt["min"] != "5" || usdt["max"] != "2000" ||
		rate["trx_per_usdt"] != "3.45" || rate["source"] != "fixed_env" || rate["at"] != "2026-03-01T12:00:00.000Z" {
		t.Errorf("USDT row %v", usdt)
	}
	rot := r.json["rotation"].(map[string]any)
	if rot["min_interval_days"] != 7.0 || rot["max_per_window"] != 2.0 || rot["window_days"] != 30.0 || len(r.json["retired"].([]any)) != 0 {
		t.Errorf("rotation/retired %s", r.body)
	}
	first := trx["address"].(string)

	// Support rotates twice (8 days apart); a third inside the window is 3018.
	ctx := context.Background()
	if _, err := store.Rotate(ctx, le.acct.ID, "support:alice", "test", policy); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Rotate(ctx, le.acct.ID, "support:alice", "test", policy); apierr.As(err).Code != apierr.DepositRotationLimited ||
		apierr.As(err).RetryAfter != 7*86400 {
		t.Fatalf("rotation inside min_interval_days: %v", err)
	}
	now = now.Add(8 * 24 * time.Hour)
	second, err := store.Rotate(ctx, le.acct.ID, "support:alice", "test", policy)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(8 * 24 * time.Hour)
	if _, err := store.Rotate(ctx, le.acct.ID, "support:alice", "test", policy); apierr.As(err).Code != apierr.DepositRotationLimited {
		t.Fatalf("third rotation inside the window: %v", err)
	}

	r = le.signed(t, k, "GET", "/v1/deposit-addresses", "")
	cur := r.json["data"].([]any)[0].(map[string]any)["address"]
	retired := r.json["retired"].([]any)
	if cur != second.Address.String() || len(retired) != 2 {
		t.Fatalf("after rotations: %s", r.body)
	}
	newest, oldest := retired[0].(map[string]any), retired[1].(map[string]any)
	if oldest["address"] != first || newest["address"] != second.Retired.String() ||
		newest["credited_until"] != "2026-03-23T12:00:00.000Z" || oldest["retired_at"] != "2026-03-01T12:00:00.000Z" {
		t.Errorf("retired, newest first: %v", retired)
	}
	var events, audits int
	_ = le.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE key = $1 AND headers->>'event' = 'deposit_address.rotated'`, le.acct.ID).Scan(&events)
	_ = le.db.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE account_id = $1 AND action = 'deposit_address.rotate'`, le.acct.ID).Scan(&audits)
	if events != 3 || audits != 2 { // first issue + two rotations; audits only for rotations
		t.Errorf("%d deposit_address.rotated events (want 3), %d audit rows (want 2)", events, audits)
	}
}

// End to end as a customer sees it: read the deposit address over the API, send TRX and
// USDT to it through the simulator's /sim/ API, and watch GET /v1/balance and GET
// /v1/account after the real chainwatch, outbox relay, Kafka and crediting consumer did
// their work.
func TestDepositThroughTheChainShowsInBalance(t *testing.T) {
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile})
	if err != nil {
		t.Fatal(err)
	}
	node := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { node.Close(); _ = sim.Close() })
	var dbPool *pgxpool.Pool
	le := newLedgerEnv(t, func(pool *pgxpool.Pool, o *Options) {
		dbPool = pool
		d, _ := deposits.NewDeriver(deposits.DevSeedHex)
		store, err := deposits.NewStore(pool, deposits.Options{Deriver: d, USDTContract: sim.USDTContract().String(), Network: network.Nile,
			Confirmations: 2})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := NewDepositAddresses(DepositAddressesOptions{Store: store, Rates: deposits.FixedRate{SunPerUSDT: 3_000_000}})
		o.Modules = append(o.Modules, m)
	})
	broker := testenv.Kafka(t)
	ctx, cancel := context.WithCancel(context.Background())
	g, gctx := errgroup.WithContext(ctx)
	t.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil {
			t.Error(err)
		}
	})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	producer, err := kafka.NewClient([]string{broker})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	relay, _ := outbox.NewRelay(outbox.RelayOptions{Pool: dbPool, Producer: producer, Logger: quiet, Registerer: reg})
	client := tron.NewClient(node.URL)
	follower, _ := chainwatch.New(chainwatch.Options{Pool: dbPool, Source: chainwatch.NewNodeSource(client, 2), Outbox: outbox.InsertRecord,
		Network: network.Nile, Tokens: []tron.Address{sim.USDTContract()}, Confirmations: 0, PollEvery: 20 * time.Millisecond, Start: 0})
	l, _ := ledgerstore.New(dbPool, ledgerstore.Options{Network: network.Nile})
	cons, err := crediting.New(crediting.Options{Pool: dbPool, Ledger: l, Rates: deposits.FixedRate{SunPerUSDT: 3_000_000},
		USDTContract: sim.USDTContract(), ConfirmationsRequired: 2, FactDepth: 0, Chain: client, SpreadBps: 50,
		PollEvery: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := crediting.NewRunner(cons, kafka.RunnerOptions{Brokers: []string{broker}, Logger: quiet, Registerer: reg,
		CommitEvery: 100 * time.Millisecond, ClientOpts: []kgo.Opt{kgo.FetchMaxWait(100 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	g.Go(func() error { return relay.Run(gctx) })
	g.Go(func() error { return follower.Run(gctx) })
	g.Go(func() error { return runner.Run(gctx) })

	k := le.key(t, scopes.DepositsRead, scopes.AccountRead)
	r := le.signed(t, k, "GET", "/v1/deposit-addresses", "")
	if r.status != 200 {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	addr := r.json["data"].([]any)[0].(map[string]any)["address"].(string)
	post := func(path string, body any) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(node.URL+path, "application/json", bytes.NewReader(b))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %s: %v %v", path, err, resp)
		}
		resp.Body.Close()
	}
	post("/sim/trx/transfer", map[string]any{"to": addr, "amount_sun": 7_000_000})
	post("/sim/usdt/transfer", map[string]any{"to": addr, "amount": 6_000_000})
	post("/sim/blocks", map[string]int{"count": 3})

	want := 7_000_000.0 + 6*2_985_000 // 3 TRX per USDT less 0.5 %
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = le.signed(t, k, "GET", "/v1/balance", "")
		if r.json["balance_sun"] == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("balance never reached %v: %s", want, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r.json["available_sun"] != want || r.json["reserved_sun"] != 0.0 {
		t.Errorf("balance %s", r.body)
	}
	a := le.signed(t, k, "GET", "/v1/account", "")
	if a.json["status"] != "active" || a.json["totals"].(map[string]any)["deposited_sun"] != want {
		t.Errorf("account after the deposits: %s", a.body)
	}
}
