package orderflow

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

	"rental/infra/custody"
	"rental/infra/ledgerstore"
	"rental/infra/orderstore"
	"rental/infra/testenv"
	"rental/infra/testenv/chainstack"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// The processor's tests run the real pieces around it: Postgres, the kfake broker over TCP,
// the outbox relay, the chain follower and the node simulator over HTTP, with fast blocks.

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// clock is the processor's wall clock; tests move it forward to reach expiry.
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

type env struct {
	t         testing.TB
	net       network.Network
	providers []Provider
	deep      DeepReserve
	db        *testenv.DB
	brokers   string
	sim       *tronsim.Sim
	simURL    string
	node      *tron.Client
	ledger    *ledgerstore.Ledger
	clock     *clock
	pools     []tron.PrivateKey // the pools' owner keys: the test's chain set-up only
	lock      LockPolicy        // the processor's DELEGATION_LOCK (default none)
	landGrace time.Duration     // the processor's LandGrace (default 2 s)
}

func poolKey(i int) tron.PrivateKey {
	seed := sha256.Sum256([]byte(fmt.Sprintf("orderflow test pool %d", i)))
	return tron.PrivateKeyFromBytes(seed[:])
}

// newEnv starts Postgres, Kafka, the simulator (stakes in TRX per pool), the relay and the
// chain follower. The processor is started separately (startFlow), so tests can run
// several replicas or none.
func newEnv(t *testing.T, stakesTRX ...int64) *env {
	t.Helper()
	return newEnvOn(t, network.Mainnet, nil, stakesTRX...)
}

// newEnvOn is newEnv on a network, with extra genesis accounts (a provider's stake).
func newEnvOn(t *testing.T, nw network.Network, extra []tronsim.GenesisAccount, stakesTRX ...int64) *env {
	t.Helper()
	return newEnvBroker(t, nw, extra, testenv.Kafka(t), stakesTRX...)
}

// newEnvBroker is newEnvOn over a broker the test made (testenv.Kafka with options).
func newEnvBroker(t *testing.T, nw network.Network, extra []tronsim.GenesisAccount, brokers string, stakesTRX ...int64) *env {
	t.Helper()
	return newEnvSim(t, nw, extra, brokers, nil, stakesTRX...)
}

// newEnvSim is newEnvBroker with the simulator's options changed by simOpts (nil: none).
func newEnvSim(t testing.TB, nw network.Network, extra []tronsim.GenesisAccount, brokers string, simOpts func(*tronsim.Options), stakesTRX ...int64) *env {
	t.Helper()
	if len(stakesTRX) == 0 {
		stakesTRX = []int64{10_000_000}
	}
	e := &env{t: t, net: nw, db: testenv.Postgres(t), brokers: brokers, clock: &clock{}}
	genesis := append([]tronsim.GenesisAccount(nil), extra...)
	for i, s := range stakesTRX {
		k := poolKey(i)
		e.pools = append(e.pools, k)
		genesis = append(genesis, tronsim.GenesisAccount{Address: k.Address(), BalanceSun: 1_000 * tron.SunPerTRX, StakeEnergySun: s * tron.SunPerTRX,
			StakeBandwidthSun: s * tron.SunPerTRX})
	}
	var opts []func(*tronsim.Options)
	if simOpts != nil {
		opts = append(opts, simOpts)
	}
	genesis = append(genesis, chainstack.SignerAccount())
	c := chainstack.Start(t, e.db.Pool, e.brokers, nw, genesis, opts...)
	e.sim, e.simURL, e.node = c.Sim, c.URL, c.Node
	chainstack.GrantSigner(t, e.sim, e.node, e.pools...)
	var err error
	e.ledger, err = ledgerstore.New(e.db.Pool, ledgerstore.Options{Network: nw, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// startFlow runs one processor replica until the test ends; stop ends it earlier.
func (e *env) startFlow() (stop func()) {
	e.t.Helper()
	_, stop = e.runFlow()
	return stop
}

// startFlowReturning is startFlow for tests that call the Flow directly.
func (e *env) startFlowReturning() *Flow {
	e.t.Helper()
	f, _ := e.runFlow()
	return f
}

func (e *env) runFlow() (*Flow, func()) {
	e.t.Helper()
	grace := e.landGrace
	if grace == 0 {
		grace = 2 * time.Second
	}
	f, err := New(Options{Pool: e.db.Pool, Node: e.node, Ledger: e.ledger, Network: e.net, Signers: e.signers(), Providers: e.providers, Deep: e.deep,
		LandGrace: grace, RetryEvery: 200 * time.Millisecond, Confirmations: 1, Now: e.clock.Now, Logger: quiet(), LockPolicy: e.lock,
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- f.Run(ctx, RunOptions{Brokers: []string{e.brokers}, SweepEvery: 50 * time.Millisecond})
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("processor: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return f, stop
}

// account creates an account funded with trx TRX and returns its id.
func (e *env) account(trx int64) string {
	e.t.Helper()
	ctx := context.Background()
	k, _ := tron.GenerateKey()
	id := events.NewID("acc")
	if _, err := e.db.Pool.Exec(ctx, `INSERT INTO accounts (id, network, owner_address, status) VALUES ($1, $2, $3, 'active')`,
		id, string(e.net), k.Address().String()); err != nil {
		e.t.Fatal(err)
	}
	if trx > 0 {
		err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
			_, err := e.ledger.Credit(ctx, tx, ledgerstore.Credit{AccountID: id, Kind: "adjustment", Ref: "fund:" + id, AmountSun: trx * tron.SunPerTRX})
			return err
		})
		if err != nil {
			e.t.Fatal(err)
		}
	}
	return id
}

// receiver returns a fresh address, activated on chain unless inactive.
func (e *env) receiver(activated bool) tron.Address {
	e.t.Helper()
	k, _ := tron.GenerateKey()
	if activated {
		e.control("/sim/trx/transfer", map[string]any{"to": k.Address().String(), "amount_sun": 1_000_000}, nil)
	}
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

// order creates an order as the edge does: hold and row (with its intent) in one
// transaction. The price is a flat 80 SUN per unit; activation costs 1.5 TRX.
type orderSpec struct {
	resource orders.Resource
	amount   int64
	tier     string
	activate bool
	receiver tron.Address
}

func (e *env) order(accountID string, s orderSpec) orderstore.Row {
	e.t.Helper()
	ctx := context.Background()
	n := orderstore.NewOrder{ID: orderstore.NewID(), AccountID: accountID, Network: e.net, ClientOrderID: events.NewID("c"),
		Resource: s.resource, Amount: s.amount, Receiver: s.receiver.String(), Activate: s.activate, CreatedAt: e.clock.Now()}
	if s.resource != orders.Activation {
		tier := s.tier
		secs := int64(300)
		if tier == "1h" {
			secs = 3600
		}
		n.Tier, n.DurationSeconds = &tier, &secs
		n.UnitPriceCenti = 8000
		n.EnergyAmountSun = s.amount * 80
	}
	if s.activate || s.resource == orders.Activation {
		n.ActivationAmountSun = 1_500_000
	}
	var row orderstore.Row
	err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error {
		if err := e.ledger.PlaceHold(ctx, tx, accountID, n.ID, n.Total()); err != nil {
			return err
		}
		var err error
		row, err = orderstore.Insert(ctx, tx, n)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return row
}

// waitStatus polls the order until it reaches one of want.
func (e *env) waitStatus(accountID, id string, within time.Duration, want ...orders.Status) orderstore.Row {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var row orderstore.Row
	for {
		var err error
		row, err = orderstore.Get(context.Background(), e.db.Pool, accountID, id)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, w := range want {
			if row.Status == w {
				return row
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("order %s is %s after %s, want %v", id, row.Status, within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// balance reads the ledger's view of the account: balance and reserved.
func (e *env) balance(accountID string) (balance, reserved int64) {
	e.t.Helper()
	err := e.db.Pool.QueryRow(context.Background(), `SELECT balance_sun, reserved_sun FROM ledger_accounts WHERE account_id = $1`, accountID).
		Scan(&balance, &reserved)
	if err != nil {
		e.t.Fatal(err)
	}
	return
}

// events returns the order events the outbox holds for the order, oldest first.
func (e *env) events(orderID string) []events.Envelope {
	e.t.Helper()
	rows, err := e.db.Pool.Query(context.Background(), `SELECT value FROM outbox WHERE topic = 'events.orders.v1' AND key = $1 ORDER BY id`, orderID)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []events.Envelope
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			e.t.Fatal(err)
		}
		var env events.Envelope
		if err := json.Unmarshal(raw, &env); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

// delegated is the staked balance all pools delegate to receiver now, for the resource.
func (e *env) delegated(receiver tron.Address, res orders.Resource) int64 {
	e.t.Helper()
	var sum int64
	for _, p := range e.pools {
		ds, err := e.node.GetDelegatedResourceV2(context.Background(), p.Address(), receiver)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, d := range ds {
			if res == orders.Bandwidth {
				sum += d.FrozenBalanceForBandwidth
			} else {
				sum += d.FrozenBalanceForEnergy
			}
		}
	}
	return sum
}

// invariants runs the ledger's invariants check and fails the test on any violation.
func (e *env) invariants() {
	e.t.Helper()
	vs, err := ledgerstore.CheckPool(context.Background(), e.db.Pool, ledgerstore.CheckOptions{LiveRefs: func(ctx context.Context, q ledgerstore.Querier, refs []string) (map[string]bool, error) {
		return orderstore.LiveRefs(ctx, q, refs)
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range vs {
		e.t.Errorf("ledger invariant violated: %s", v)
	}
}

// signers are the processor's pool signers (the chain set-up granted them in newEnvSim).
func (e *env) signers() *custody.Signers {
	e.t.Helper()
	pools := make([]tron.Address, len(e.pools))
	for i, k := range e.pools {
		pools[i] = k.Address()
	}
	return chainstack.Signers(e.t, e.node, pools...)
}
