package crediting_test

// Integration tests of the crediting stage against real services: the node simulator over
// HTTP (driven through /sim/), real Postgres (a database of the test's own), the kfake
// broker over TCP, the real outbox relay and the real chainwatch follower. Nothing is
// mocked: a transfer goes simulator -> chainwatch -> outbox -> relay -> Kafka -> crediting.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"rental/chainwatch"
	"rental/consumers/crediting"
	"rental/infra/accounts"
	"rental/infra/deposits"
	"rental/infra/kafka"
	"rental/infra/ledgerstore"
	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/topics"
)

const (
	envChild  = "CREDITING_TEST_CHILD"
	envDB     = "CREDITING_TEST_DB"
	envBroker = "CREDITING_TEST_BROKER"
	envNode   = "CREDITING_TEST_NODE"
	envUSDT   = "CREDITING_TEST_USDT"

	testRate     = 3_400_000 // SUN per USDT before the spread
	testSpread   = 50
	testRequired = 3 // confirmations required; chainwatch runs at depth 0
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// pipelineConfig names the services a pipeline runs against.
type pipelineConfig struct {
	dbURL, broker, node string
	usdt                tron.Address
	group               string // "" = crediting.Group
	own                 []tron.Address
}

// runPipeline runs the outbox relay, chainwatch (depth 0) and the crediting consumer until
// ctx ends: the stages between a simulated transfer and a credited balance.
func runPipeline(ctx context.Context, c pipelineConfig) error {
	pool, err := pgxpool.New(ctx, c.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	producer, err := kafka.NewClient([]string{c.broker})
	if err != nil {
		return err
	}
	defer producer.Close()
	reg := prometheus.NewRegistry()
	relay, err := outbox.NewRelay(outbox.RelayOptions{Pool: pool, Producer: producer, Logger: quiet(), Registerer: reg, SweepEvery: 100 * time.Millisecond})
	if err != nil {
		return err
	}
	node := tron.NewClient(c.node)
	follower, err := chainwatch.New(chainwatch.Options{
		Pool: pool, Source: chainwatch.NewNodeSource(node, 4), Outbox: outbox.InsertRecord, Network: network.Nile,
		Tokens: []tron.Address{c.usdt}, Confirmations: 0, PollEvery: 20 * time.Millisecond, Start: 0, BatchBlocks: 5,
	})
	if err != nil {
		return err
	}
	l, err := ledgerstore.New(pool, ledgerstore.Options{Network: network.Nile})
	if err != nil {
		return err
	}
	cons, err := crediting.New(crediting.Options{
		Pool: pool, Ledger: l, Rates: deposits.FixedRate{SunPerUSDT: testRate}, USDTContract: c.usdt, OwnAddresses: c.own,
		ConfirmationsRequired: testRequired, FactDepth: 0, Chain: node, SpreadBps: testSpread,
		MinDepositSun: 1_000_000, PollEvery: 20 * time.Millisecond, WaitStep: 2 * time.Second, Logger: quiet(),
	})
	if err != nil {
		return err
	}
	runner, err := crediting.NewRunner(cons, kafka.RunnerOptions{
		Brokers: []string{c.broker}, Group: c.group, Logger: quiet(), Registerer: reg,
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, CommitEvery: 200 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(200 * time.Millisecond),
			kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return relay.Run(gctx) })
	g.Go(func() error { return follower.Run(gctx) })
	g.Go(func() error { return runner.Run(gctx) })
	return g.Wait()
}

func runChild() int {
	usdt, err := tron.ParseAddress(os.Getenv(envUSDT))
	if err == nil {
		err = runPipeline(context.Background(), pipelineConfig{
			dbURL: os.Getenv(envDB), broker: os.Getenv(envBroker), node: os.Getenv(envNode), usdt: usdt,
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type stack struct {
	t      *testing.T
	db     *testenv.DB
	broker string
	simURL string
	usdt   tron.Address
	faucet string
	own    []tron.Address
	ledger *ledgerstore.Ledger
	deps   *deposits.Store
}

func newStack(t *testing.T) *stack {
	t.Helper()
	db := testenv.Postgres(t)
	broker := testenv.Kafka(t)
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	l, err := ledgerstore.New(db.Pool, ledgerstore.Options{Network: network.Nile})
	if err != nil {
		t.Fatal(err)
	}
	d, err := deposits.NewDeriver(deposits.DevSeedHex)
	if err != nil {
		t.Fatal(err)
	}
	deps, err := deposits.NewStore(db.Pool, deposits.Options{Deriver: d, USDTContract: sim.USDTContract().String(), Network: network.Nile})
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, db: db, broker: broker, simURL: srv.URL, usdt: sim.USDTContract(), faucet: sim.FaucetAddress().String(), ledger: l, deps: deps}
	t.Cleanup(func() {
		v, err := ledgerstore.CheckPool(context.Background(), db.Pool, ledgerstore.CheckOptions{})
		if err != nil {
			t.Error(err)
		}
		for _, x := range v {
			t.Errorf("invariant broken: %s", x)
		}
	})
	return s
}

func (s *stack) config() pipelineConfig {
	return pipelineConfig{dbURL: s.db.URL, broker: s.broker, node: s.simURL, usdt: s.usdt}
}

// start runs the pipeline in this process until the test ends.
func (s *stack) start(group string) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := s.config()
	c.group, c.own = group, s.own
	go func() { done <- runPipeline(ctx, c) }()
	s.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				s.t.Errorf("pipeline: %v", err)
			}
		case <-time.After(20 * time.Second):
			s.t.Error("pipeline did not stop")
		}
	})
}

func (s *stack) account() (string, tron.Address) {
	s.t.Helper()
	store, _ := accounts.New(s.db.Pool, accounts.Options{})
	var b [20]byte
	_, _ = rand.Read(b[:])
	owner, _ := tron.AddressFromBytes(b[:])
	a, _, err := store.CreateOrGetByOwner(context.Background(), network.Nile, owner, nil, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	addr, err := s.deps.Current(context.Background(), a.ID)
	if err != nil {
		s.t.Fatal(err)
	}
	return a.ID, addr
}

func (s *stack) control(path string, body, out any) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(s.simURL+path, "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		s.t.Fatalf("POST %s: HTTP %d %s", path, resp.StatusCode, msg)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *stack) trx(to tron.Address, sun int64) string {
	var r struct{ TxID string }
	s.control("/sim/trx/transfer", map[string]any{"to": to.String(), "amount_sun": sun}, &r)
	return r.TxID
}

func (s *stack) usdtTo(to tron.Address, units int64) string {
	var r struct{ TxID string }
	s.control("/sim/usdt/transfer", map[string]any{"to": to.String(), "amount": units}, &r)
	return r.TxID
}

func (s *stack) mine(n int) int64 {
	var r struct{ Head int64 }
	s.control("/sim/blocks", map[string]int{"count": n}, &r)
	return r.Head
}

func (s *stack) fork(depth int) tronsim.ForkResult {
	var r tronsim.ForkResult
	s.control("/sim/fork", map[string]int{"depth": depth}, &r)
	return r
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *stack) count(sql string, args ...any) int {
	s.t.Helper()
	var n int
	if err := s.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// accountEvents reads events.accounts.v1 from the start until n records keyed by acc
// arrived, and counts them by event type.
func (s *stack) accountEvents(acc string, n int) map[string]int {
	s.t.Helper()
	cl, err := kafka.NewClient([]string{s.broker}, kgo.ConsumeTopics(topics.AccountEvents.Name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, seen := map[string]int{}, 0
	for seen < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if string(r.Key) != acc {
				return
			}
			var env events.Envelope
			if err := json.Unmarshal(r.Value, &env); err != nil {
				s.t.Errorf("record is not an envelope: %v", err)
				return
			}
			out[env.Event]++
			seen++
		})
	}
	return out
}

// groupCaughtUp reports whether group has committed the end offset of every partition of
// the chain facts topic, i.e. processed every fact on it.
func (s *stack) groupCaughtUp(group string) bool {
	s.t.Helper()
	cl, err := kafka.NewClient([]string{s.broker})
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	ends, err := adm.ListEndOffsets(ctx, topics.ChainFacts.Name)
	if err != nil {
		return false
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset == 0 {
			return
		}
		c, found := committed.Lookup(o.Topic, o.Partition)
		if !found || c.At < o.Offset {
			ok = false
		}
	})
	return ok
}

func (s *stack) cursor() int64 {
	var n int64
	_ = s.db.Pool.QueryRow(context.Background(), `SELECT coalesce(max(block_num), -1) FROM chain_cursor`).Scan(&n)
	return n
}

func (s *stack) summary(acc string) ledgerstore.Summary {
	s.t.Helper()
	sum, err := s.ledger.Summary(context.Background(), acc)
	if err != nil {
		s.t.Fatal(err)
	}
	return sum
}

type deposit struct {
	status   string
	credited *int64
	factID   string
	blockNum int64
}

func (s *stack) deposit(tx string, logIndex int) deposit {
	s.t.Helper()
	var d deposit
	err := s.db.Pool.QueryRow(context.Background(), `SELECT status, credited_sun, fact_id, block_num FROM deposits WHERE tx_hash = $1 AND log_index = $2`,
		tx, logIndex).Scan(&d.status, &d.credited, &d.factID, &d.blockNum)
	if err != nil {
		s.t.Fatalf("deposit %s/%d: %v", tx, logIndex, err)
	}
	return d
}

// credited returns the balance.credited events of acc in the outbox, oldest first.
func (s *stack) credited(acc string) []events.BalanceCredited {
	s.t.Helper()
	rows, err := s.db.Pool.Query(context.Background(), `SELECT value FROM outbox WHERE key = $1 AND headers->>'event' = 'balance.credited' ORDER BY id`, acc)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	var out []events.BalanceCredited
	for rows.Next() {
		var b []byte
		_ = rows.Scan(&b)
		var env events.Envelope
		if err := json.Unmarshal(b, &env); err != nil {
			s.t.Fatal(err)
		}
		validateCredited(s.t, env.Data)
		var d events.BalanceCredited
		_ = json.Unmarshal(env.Data, &d)
		out = append(out, d)
	}
	return out
}

func validateCredited(t *testing.T, data []byte) {
	t.Helper()
	raw, _ := events.SchemaFiles.ReadFile("balancecredited.schema.json")
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	_ = c.AddResource("b.json", doc)
	sch, err := c.Compile("b.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err := sch.Validate(inst); err != nil {
		t.Errorf("balance.credited %s fails its schema: %v", data, err)
	}
}

func TestDepositsCreditedOnceAfterConfirmations(t *testing.T) {
	s := newStack(t)
	acc, addr := s.account()
	var stranger [20]byte
	_, _ = rand.Read(stranger[:])
	other, _ := tron.AddressFromBytes(stranger[:])

	trx := s.trx(addr, 5_000_000)
	usdt10 := s.usdtTo(addr, 10_000_000)     // 10 USDT: credited
	usdt3 := s.usdtTo(addr, 3_000_000)       // below 5: held_below_min
	usdtBig := s.usdtTo(addr, 2_500_000_000) // above 2000: held_for_review
	dust := s.trx(addr, 500_000)             // below min_deposit_sun: residual
	s.trx(other, 7_000_000)                  // not a deposit address
	// An internal move from one of the service's own addresses (a stake pool) is no deposit.
	ownSeed := sha256.Sum256([]byte("crediting test own pool"))
	own := tron.PrivateKeyFromBytes(ownSeed[:])
	s.control("/sim/accounts", map[string]any{"address": own.Address().String(), "balance_sun": 100_000_000}, nil)
	s.control("/sim/trx/transfer", map[string]any{"to": addr.String(), "amount_sun": 2_000_000, "from_key": own.Hex()}, nil)
	block := s.mine(1)
	s.own = []tron.Address{own.Address()}
	s.start("")

	waitFor(t, 10*time.Second, "chainwatch to read the block", func() bool { return s.cursor() >= block })
	time.Sleep(300 * time.Millisecond)
	if n := s.count(`SELECT count(*) FROM deposits`); n != 0 {
		t.Fatalf("%d deposits recorded with 0 of %d confirmations", n, testRequired)
	}
	if b := s.summary(acc); b.BalanceSun != 0 {
		t.Fatalf("credited before confirmations: %+v", b)
	}

	s.mine(testRequired)
	waitFor(t, 15*time.Second, "five deposits", func() bool { return s.count(`SELECT count(*) FROM deposits`) == 5 })

	wantUSDTSun := int64(10 * 3_383_000) // 3.4 TRX less 0.5 %
	for tx, want := range map[string]string{trx: "credited", usdt10: "credited", usdt3: "held_below_min", usdtBig: "held_for_review", dust: "residual"} {
		li := -1
		if tx == usdt10 || tx == usdt3 || tx == usdtBig {
			li = 0
		}
		if d := s.deposit(tx, li); d.status != want {
			t.Errorf("deposit %s: %s, want %s", tx, d.status, want)
		}
	}
	sum := s.summary(acc)
	if sum.BalanceSun != 5_000_000+wantUSDTSun || sum.DepositedSun != sum.BalanceSun || sum.ReservedSun != 0 {
		t.Fatalf("balance after crediting: %+v", sum)
	}
	var status string
	_ = s.db.Pool.QueryRow(context.Background(), `SELECT status FROM accounts WHERE id = $1`, acc).Scan(&status)
	if status != "active" {
		t.Errorf("account status %q after the first credit, want active", status)
	}

	evs := s.credited(acc)
	if len(evs) != 2 {
		t.Fatalf("%d balance.credited events, want 2 (held deposits emit none): %+v", len(evs), evs)
	}
	byAsset := map[string]events.BalanceCredited{}
	for _, e := range evs {
		byAsset[e.Asset] = e
	}
	te, ue := byAsset["TRX"], byAsset["USDT"]
	if te.Reason != "deposit" || te.Currency != "TRX" || te.AmountSun != 5_000_000 || te.TxHash == nil || *te.TxHash != trx ||
		te.TxID == nil || *te.TxID != trx || te.Sender == nil || *te.Sender != s.faucet || te.BlockNumber == nil || *te.BlockNumber != block ||
		te.Confirmations != nil || te.BalanceSun != nil || te.USDTAmount != nil || te.Rate != nil || te.RateSource != nil || te.SpreadBps != nil {
		t.Errorf("TRX event %+v", te)
	}
	if ue.AmountSun != wantUSDTSun || ue.USDTAmount == nil || *ue.USDTAmount != "10" || ue.Rate == nil || *ue.Rate != 3_383_000 ||
		ue.RateSource == nil || *ue.RateSource != "fixed_env" || ue.SpreadBps == nil || *ue.SpreadBps != testSpread ||
		ue.TxHash == nil || *ue.TxHash != usdt10 || ue.Currency != "TRX" || ue.ReferenceID == nil {
		t.Errorf("USDT event %+v", ue)
	}

	// A second consumer group reads every fact again from the start: a full re-read of the
	// blocks credits nothing twice.
	s.start("crediting-reread")
	waitFor(t, 20*time.Second, "the second group to read every fact", func() bool { return s.groupCaughtUp("crediting-reread") })
	if again := s.summary(acc); again.BalanceSun != sum.BalanceSun {
		t.Fatalf("re-read changed the balance: %d -> %d", sum.BalanceSun, again.BalanceSun)
	}
	if n := len(s.credited(acc)); n != 2 {
		t.Fatalf("%d balance.credited events after the re-read, want 2", n)
	}
	if n := s.count(`SELECT count(*) FROM deposits`); n != 5 {
		t.Fatalf("%d deposits recorded, want 5 (the transfer from an own address is no deposit)", n)
	}

	// The events reach Kafka (events.accounts.v1, keyed by the account) through the relay.
	onKafka := s.accountEvents(acc, 3)
	if onKafka["balance.credited"] != 2 || onKafka["deposit_address.rotated"] != 1 {
		t.Fatalf("events on Kafka: %v, want 2 balance.credited and the address's first deposit_address.rotated", onKafka)
	}
}

// A fork that orphans the deposit's block before it has its confirmations: nothing is
// credited from the orphaned block; the transfer re-included on the new branch is credited
// once, from its new block.
func TestForkBeforeConfirmationCreditsOnce(t *testing.T) {
	s := newStack(t)
	acc, addr := s.account()
	s.start("")
	tx := s.trx(addr, 3_000_000)
	block := s.mine(1)
	waitFor(t, 10*time.Second, "chainwatch to read the block", func() bool { return s.cursor() >= block })
	fork := s.fork(1)
	if len(fork.ReIncluded) != 1 {
		t.Fatalf("fork re-included %v", fork.ReIncluded)
	}
	s.mine(testRequired + 1)
	waitFor(t, 15*time.Second, "the deposit to be credited", func() bool { return s.summary(acc).BalanceSun == 3_000_000 })
	time.Sleep(500 * time.Millisecond)
	d := s.deposit(tx, -1)
	if d.status != "credited" || d.blockNum != block+1 {
		t.Errorf("deposit %+v, want credited from block %d", d, block+1)
	}
	if n := len(s.credited(acc)); n != 1 {
		t.Errorf("%d balance.credited events, want 1", n)
	}
	if n := s.count(`SELECT count(*) FROM ledger_postings WHERE account_id = $1`, acc); n != 1 {
		t.Errorf("%d postings, want 1", n)
	}
}

// A fork deeper than the confirmations, after the credit: the credit is reversed
// (deposit_reversal) and the re-included transfer credited again; the balance ends with
// the deposit counted once and the customer saw one balance.credited.
func TestForkAfterCreditReversesAndCreditsOnce(t *testing.T) {
	s := newStack(t)
	acc, addr := s.account()
	s.start("")
	tx := s.trx(addr, 4_000_000)
	s.mine(testRequired + 1)
	waitFor(t, 15*time.Second, "the first credit", func() bool { return s.summary(acc).BalanceSun == 4_000_000 })
	first := s.deposit(tx, -1)

	s.fork(testRequired + 1) // orphans the deposit's block
	waitFor(t, 15*time.Second, "the reversal", func() bool {
		return s.count(`SELECT count(*) FROM ledger_postings WHERE account_id = $1 AND kind = 'deposit_reversal'`, acc) == 1
	})
	s.mine(testRequired)
	waitFor(t, 15*time.Second, "the second credit", func() bool {
		return s.count(`SELECT count(*) FROM ledger_postings WHERE account_id = $1 AND kind = 'deposit'`, acc) == 2
	})
	time.Sleep(300 * time.Millisecond)
	if b := s.summary(acc); b.BalanceSun != 4_000_000 || b.DepositedSun != 4_000_000 {
		t.Fatalf("after the fork: %+v", b)
	}
	again := s.deposit(tx, -1)
	if again.status != "credited" || again.factID == first.factID || again.blockNum <= first.blockNum {
		t.Errorf("deposit after the fork %+v (before %+v)", again, first)
	}
	if n := len(s.credited(acc)); n != 1 {
		t.Errorf("%d balance.credited events, want 1", n)
	}
}

// The whole pipeline (relay, chainwatch and the crediting consumer) runs in a child process
// that is killed with SIGKILL part-way through crediting a stream of deposits; the same
// stages then run here. Every deposit is credited exactly once.
func TestSIGKILLMidStreamCreditsEachDepositOnce(t *testing.T) {
	s := newStack(t)
	acc, addr := s.account()
	const n = 300
	var want int64
	for i := range n {
		amount := int64(1_000_000 + i)
		want += amount
		s.trx(addr, amount)
		if i%3 == 2 {
			s.mine(1)
		}
	}
	s.mine(testRequired + 1)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envChild+"=1", envDB+"="+s.db.URL, envBroker+"="+s.broker, envNode+"="+s.simURL, envUSDT+"="+s.usdt.String())
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the child to credit part of the stream", func() bool {
		return s.count(`SELECT count(*) FROM deposits WHERE status = 'credited'`) >= n/10
	})
	if err := syscall.Kill(child.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killedAt := s.count(`SELECT count(*) FROM deposits WHERE status = 'credited'`)
	if killedAt >= n {
		t.Fatalf("the child credited all %d deposits before it was killed", n)
	}

	restarted := time.Now()
	s.start("")
	waitFor(t, 90*time.Second, "every deposit", func() bool {
		return s.count(`SELECT count(*) FROM deposits WHERE status = 'credited'`) == n
	})
	time.Sleep(time.Second)
	if b := s.summary(acc); b.BalanceSun != want {
		t.Fatalf("balance %d, want %d", b.BalanceSun, want)
	}
	if got := s.count(`SELECT count(*) FROM ledger_postings WHERE account_id = $1`, acc); got != n {
		t.Errorf("%d postings, want %d", got, n)
	}
	evs := s.credited(acc)
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[*e.TxHash] {
			t.Errorf("two balance.credited for %s", *e.TxHash)
		}
		seen[*e.TxHash] = true
	}
	if len(evs) != n {
		t.Errorf("%d balance.credited events, want %d", len(evs), n)
	}
	var span float64
	_ = s.db.Pool.QueryRow(context.Background(), `SELECT extract(epoch FROM max(credited_at) - min(credited_at))::float8
		FROM deposits WHERE credited_at >= $1`, restarted).Scan(&span)
	t.Logf("child killed after %d of %d credits; the restarted pipeline credited the other %d in %v including the group rebalance, %.0f credits/s once running",
		killedAt, n, n-killedAt, time.Since(restarted).Round(time.Millisecond), float64(n-killedAt-1)/span)
}
