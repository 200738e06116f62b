package subscriptions_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/acceptance"
	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/substore"
	"rental/infra/testenv"
	"rental/infra/testenv/chainstack"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/processors/orderflow"
	"rental/processors/subscriptions"
	"rental/schemas/autorefill"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// The watcher's tests run the real pieces around it: Postgres, the kfake broker over TCP,
// the outbox relay, the chain follower, the order processor and the node simulator over
// HTTP with fast blocks; refills are placed through order acceptance (infra/acceptance: every check
// of POST /v1/orders) priced from a snapshot of the test model below.

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// clock is the watcher's wall clock; tests move it a day on.
type clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// liveSnapshots builds a snapshot of the test model at the current time whenever asked:
// 1 h energy at 60.00 SUN, 5 m at 40.00, from the own pools.
type liveSnapshots struct{ t *testing.T }

func testModel() pricing.Model {
	return pricing.Model{
		Network:  network.Mainnet,
		Revision: 1,
		DayParts: []pricing.DayPart{{ID: "all", Label: "All day", StartMinute: 0, EndMinute: 1440, FactorBPS: 10_000}},
		Rows: []pricing.Row{
			{Resource: pricing.Energy, Tier: pricing.Tier5m, BasePrice: 4_000, MinAmount: 10_000, MaxAmount: 5_000_000, Enabled: true},
			{Resource: pricing.Energy, Tier: pricing.Tier1h, BasePrice: 6_000, MinAmount: 10_000, MaxAmount: 5_000_000, Enabled: true},
			{Resource: pricing.Bandwidth, Tier: pricing.Tier1h, BasePrice: 80_000, MinAmount: 1_000, MaxAmount: 100_000, Enabled: true},
		},
		ActivationPriceSun: 1_100_000,
		ValidFor:           time.Minute,
	}
}

func (l liveSnapshots) Current() (pricing.Snapshot, bool) {
	s, err := pricing.Build(pricing.Inputs{Model: testModel(), Now: time.Now(),
		Supply: pricing.Supply{Instant: map[pricing.Resource]int64{pricing.Energy: 50_000_000, pricing.Bandwidth: 1_000_000}}})
	if err != nil {
		l.t.Error(err)
		return s, false
	}
	return s, true
}

type env struct {
	t       *testing.T
	db      *testenv.DB
	brokers string
	sim     *tronsim.Sim
	simURL  string
	node    *tron.Client
	ledger  *ledgerstore.Ledger
	placer  subscriptions.Placer
	clock   *clock
	pools   []tron.PrivateKey
}

func poolKey(i int) tron.PrivateKey {
	seed := sha256.Sum256([]byte(fmt.Sprintf("subscriptions test pool %d", i)))
	return tron.PrivateKeyFromBytes(seed[:])
}

// newEnv starts Postgres, Kafka, the simulator with one stake pool, the relay and the chain
// follower, and builds order acceptance for placements. The order processor and
// the watchers are started separately.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, db: testenv.Postgres(t), brokers: testenv.Kafka(t), clock: &clock{}}
	k := poolKey(0)
	e.pools = []tron.PrivateKey{k}
	c := chainstack.Start(t, e.db.Pool, e.brokers, network.Mainnet, []tronsim.GenesisAccount{{Address: k.Address(), BalanceSun: 1_000 * tron.SunPerTRX,
		StakeEnergySun: 10_000_000 * tron.SunPerTRX, StakeBandwidthSun: 10_000_000 * tron.SunPerTRX}, chainstack.SignerAccount()})
	e.sim, e.simURL, e.node = c.Sim, c.URL, c.Node
	chainstack.GrantSigner(t, e.sim, e.node, k)
	var err error
	e.ledger, err = ledgerstore.New(e.db.Pool, ledgerstore.Options{Network: network.Mainnet})
	if err != nil {
		t.Fatal(err)
	}
	pm, err := acceptance.NewPrices(acceptance.PricesOptions{Network: network.Mainnet, Snapshots: liveSnapshots{t}, Chain: e.node})
	if err != nil {
		t.Fatal(err)
	}
	om, err := acceptance.NewOrders(acceptance.Options{Network: network.Mainnet, Prices: pm, Ledger: e.ledger,
		Idempotency: idempotency.New(e.db.Pool, idempotency.Options{}), OwnAddresses: []tron.Address{k.Address()}})
	if err != nil {
		t.Fatal(err)
	}
	e.placer = om
	t.Cleanup(func() {
		vs, err := ledgerstore.CheckPool(context.Background(), e.db.Pool, ledgerstore.CheckOptions{})
		if err != nil {
			t.Error(err)
		}
		for _, v := range vs {
			t.Errorf("ledger invariant: %s", v)
		}
	})
	return e
}

// startFlow runs one order processor replica until the test ends.
func (e *env) startFlow() {
	e.t.Helper()
	f, err := orderflow.New(orderflow.Options{Pool: e.db.Pool, Node: e.node, Ledger: e.ledger, Network: network.Mainnet, Signers: chainstack.Signers(e.t, e.node, e.pools[0].Address()),
		LandGrace: 2 * time.Second, RetryEvery: 200 * time.Millisecond, Confirmations: 1, Logger: quiet(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.Run(ctx, orderflow.RunOptions{Brokers: []string{e.brokers}, SweepEvery: 50 * time.Millisecond})
	}()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("processor: %v", err)
		}
	})
}

// startWatcher runs one watcher replica until the test ends.
func (e *env) startWatcher(every time.Duration) *subscriptions.Watcher {
	e.t.Helper()
	w, err := subscriptions.New(subscriptions.Options{Pool: e.db.Pool, Chain: e.node, Placer: e.placer, Ledger: e.ledger,
		CheckEvery: every, PollEvery: every / 2, Grace: 6 * time.Hour, Now: e.clock.Now, Logger: quiet(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("watcher: %v", err)
		}
	})
	return w
}

// account creates an active account credited with sun.
func (e *env) account(sun int64) string {
	e.t.Helper()
	k, _ := tron.GenerateKey()
	id := events.NewID("acc")
	if _, err := e.db.Pool.Exec(context.Background(), `INSERT INTO accounts (id, network, owner_address, status) VALUES ($1, 'mainnet', $2, 'active')`,
		id, k.Address().String()); err != nil {
		e.t.Fatal(err)
	}
	if sun > 0 {
		e.credit(id, sun)
	}
	return id
}

// credit is a support adjustment of sun to the account.
func (e *env) credit(accountID string, sun int64) {
	e.t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
		_, err := e.ledger.Credit(ctx, tx, ledgerstore.Credit{AccountID: accountID, Kind: "adjustment", Ref: events.NewID("fund"), AmountSun: sun})
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) availableSun(accountID string) int64 {
	e.t.Helper()
	s, err := e.ledger.Summary(context.Background(), accountID)
	if err != nil {
		e.t.Fatal(err)
	}
	return s.AvailableSun
}

// receiver returns a fresh address activated on chain, holding no energy.
func (e *env) receiver() tron.Address {
	e.t.Helper()
	k, _ := tron.GenerateKey()
	e.control("/sim/trx/transfer", map[string]any{"to": k.Address().String(), "amount_sun": 1_000_000}, nil)
	e.waitFor("receiver activated", 10*time.Second, func() bool {
		a, err := e.node.GetAccount(context.Background(), k.Address())
		return err == nil && a.Exists()
	})
	return k.Address()
}

func (e *env) control(path string, body, out any) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(e.simURL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		e.t.Fatalf("%s: %d %s", path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatal(err)
		}
	}
}

// energy is the receiver's free energy as the node reports it.
func (e *env) energy(a tron.Address) int64 {
	e.t.Helper()
	r, err := e.node.GetAccountResource(context.Background(), a)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.EnergyLimit - r.EnergyUsed
}

// useEnergy burns energy on the receiver through the simulator's control API.
func (e *env) useEnergy(a tron.Address, n int64) {
	e.t.Helper()
	e.control("/sim/energy/use", map[string]any{"address": a.String(), "energy": n}, nil)
}

func (e *env) waitFor(what string, d time.Duration, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// legacy stores an active legacy subscription due for a check now.
type legacySpec struct {
	mode             autorefill.Mode
	resource, tier   string
	threshold        int64
	refill           int64
	maxPrice         *int64
	maxRefillsPerDay *int
}

func (e *env) legacy(accountID string, recv tron.Address, s legacySpec) string {
	e.t.Helper()
	if s.mode == "" {
		s.mode = autorefill.Refill
	}
	if s.resource == "" {
		s.resource = "energy"
	}
	if s.tier == "" {
		s.tier = "1h"
	}
	return e.insert(substore.Row{ID: substore.NewID(), AccountID: accountID, Network: network.Mainnet, Kind: autorefill.Legacy,
		Receiver: recv.String(), Resource: s.resource, Mode: s.mode, Tier: s.tier, ThresholdAmount: s.threshold, RefillAmount: s.refill,
		MaxPriceSun: s.maxPrice, MaxRefillsPerDay: s.maxRefillsPerDay}, false)
}

// plan stores an active plan subscription, charging its first day as creation does.
func (e *env) plan(accountID string, recv tron.Address, rule autorefill.Rule) string {
	e.t.Helper()
	return e.insert(substore.Row{ID: substore.NewID(), AccountID: accountID, Network: network.Mainnet, Kind: autorefill.Plan,
		Receiver: recv.String(), Resource: "energy", Mode: autorefill.Refill, Tier: "1h", ThresholdAmount: rule.Low, RefillAmount: autorefill.SmallestTopUp(rule),
		Reserve: &rule.Reserve, Low: &rule.Low, High: &rule.High, Preset: autorefill.PresetOf(rule), DailyFeeSun: autorefill.DailyFeeSun(rule.Reserve)}, true)
}

func (e *env) insert(s substore.Row, charge bool) string {
	e.t.Helper()
	ctx := context.Background()
	now := e.clock.Now().UTC().Truncate(time.Millisecond)
	s.CreatedAt = now
	err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
		row, existing, err := substore.Insert(ctx, tx, s)
		if err != nil || existing != "" {
			return fmt.Errorf("insert: %v (existing %q)", err, existing)
		}
		if charge {
			if err := substore.ChargeFee(ctx, tx, e.ledger, &row, now, now); err != nil {
				return err
			}
		}
		row.NextCheckAt = &now
		return substore.Save(ctx, tx, row, now)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return s.ID
}

func (e *env) sub(id string) substore.Row {
	e.t.Helper()
	var acc string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT account_id FROM subscriptions WHERE id = $1`, id).Scan(&acc); err != nil {
		e.t.Fatal(err)
	}
	r, err := substore.Get(context.Background(), e.db.Pool, acc, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// events returns the data of subscription events of type typ for subscription id, oldest first.
func (e *env) events(id, typ string) []map[string]any {
	e.t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `SELECT value FROM outbox WHERE topic = 'events.subscriptions.v1' AND key = $1
		AND headers->>'event' = $2 ORDER BY id`, id, typ)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var v []byte
		if err := rows.Scan(&v); err != nil {
			e.t.Fatal(err)
		}
		var env map[string]any
		if err := json.Unmarshal(v, &env); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, env["data"].(map[string]any))
	}
	return out
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) orderStatus(id string) string {
	e.t.Helper()
	var s string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT status FROM orders WHERE id = $1`, id).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }
