package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/eventschema"
	"rental/schemas/network"
	"rental/schemas/topics"
)

// stack is one dev stack process started by the test, on ports of its own.
type stack struct {
	t    *testing.T
	bin  string
	env  []string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	api  string
	sim  string
	kafk string
	ops  string // the operations listener (METRICS_ADDR), "" while it is off
	db   string // the stack's own database, cloned from the migrated template
}

func newStack(t *testing.T) *stack {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "devstack")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build devstack: %v\n%s", err, out)
	}
	db := testenv.Postgres(t)
	s := &stack{t: t, bin: bin, api: testenv.FreeAddr(t), sim: testenv.FreeAddr(t), kafk: testenv.FreeAddr(t), db: db.URL}
	s.env = append(os.Environ(),
		"DATABASE_URL="+db.URL,
		"HTTP_ADDR="+s.api,
		"SIM_ADDR="+s.sim,
		"PROVIDER_SIM_ADDR="+testenv.FreeAddr(t),
		"PRICER_INTERVAL=300ms",
		"KAFKA_BROKERS="+s.kafk,
		"METRICS_ADDR=off",
		"DATA_DIR="+t.TempDir(),
		"SIM_BLOCK_INTERVAL=200ms",
		"CONFIRMATIONS=1",
		"CHAIN_POLL_INTERVAL=100ms",
		"OUTBOX_SWEEP_INTERVAL=200ms",
	)
	return s
}

// start launches the process and waits for GET /v1/status to answer, as `make run` must
// within 30 s.
// start runs the stack and returns once GET /v1/status answers 200 (every component
// operational or degraded).
func (s *stack) start() time.Duration { return s.startUntil(http.StatusOK) }

// restart runs the stack again and returns as soon as the API answers: /v1/status may say
// 503 for up to its 10 s cache while the pricer's first snapshot is missing, time in which
// the restarted stages already work.
func (s *stack) restart() time.Duration { return s.startUntil(0) }

// startUntil runs the stack and waits for GET /v1/status to answer with X-Request-Id and
// the status code want (0: any).
func (s *stack) startUntil(want int) time.Duration {
	s.t.Helper()
	s.log = &bytes.Buffer{}
	s.cmd = exec.Command(s.bin)
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	began := time.Now()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	cmd := s.cmd
	s.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	for time.Since(began) < 30*time.Second {
		resp, err := http.Get("http://" + s.api + "/v1/status")
		if err == nil {
			resp.Body.Close()
			if (want == 0 || resp.StatusCode == want) && resp.Header.Get("X-Request-Id") != "" {
				return time.Since(began)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("GET /v1/status did not answer (want %d) within 30 s; log:\n%s", want, s.log)
	return 0
}

func (s *stack) kill() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	_ = s.cmd.Wait()
}

func (s *stack) stop() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatal(err)
	}
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("SIGTERM exit: %v\nlog:\n%s", err, s.log)
	}
}

// consume reads topic from the start in this test process, a separate process from the
// stack, with a stock Kafka client, until done reports true or the deadline passes. Every
// record it reads must pass the schema of its topic's values (schemas/events).
func consume(t *testing.T, brokers, topic string, within time.Duration, done func(*kgo.Record) bool) {
	t.Helper()
	set, err := eventschema.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	consumeUnchecked(t, brokers, topic, within, func(r *kgo.Record) bool {
		if err := set.Record(r.Topic, r.Key, r.Value); err != nil {
			t.Errorf("record %s/%d@%d breaks its schema: %v", r.Topic, r.Partition, r.Offset, err)
		}
		return done(r)
	})
}

// consumeUnchecked is consume for a topic holding hand-made records.
func consumeUnchecked(t *testing.T, brokers, topic string, within time.Duration, done func(*kgo.Record) bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("topic %s: condition not met within %s", topic, within)
		}
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			if !stop && done(r) {
				stop = true
			}
		})
		if stop {
			return
		}
	}
}

// withOps turns the operations listener on, on a port of its own.
func (s *stack) withOps() *stack {
	s.ops = testenv.FreeAddr(s.t)
	s.env = append(s.env, "METRICS_ADDR="+s.ops) // later entries win
	return s
}

// opsGet answers GET path on the operations listener: status and body.
func (s *stack) opsGet(path string) (int, []byte) {
	s.t.Helper()
	resp, err := http.Get("http://" + s.ops + path)
	if err != nil {
		s.t.Fatalf("GET %s on the operations listener: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestDevStackServesStatusAndPublishesChainFacts(t *testing.T) {
	s := newStack(t).withOps()
	took := s.start()
	t.Logf("GET /v1/status answered %s after start", took.Round(time.Millisecond))

	// The operations listener answers the probes the stage binaries serve (docs/operations.md),
	// ready on every dependency of the stages the dev stack runs.
	if code, body := s.opsGet("/healthz"); code != 200 || string(body) != `{"status":"alive"}` {
		t.Fatalf("GET /healthz: %d %s", code, body)
	}
	code, body := s.opsGet("/readyz")
	var rep struct {
		Status  string
		Checked []string
	}
	if err := json.Unmarshal(body, &rep); code != 200 || err != nil || rep.Status != "ready" ||
		strings.Join(rep.Checked, ",") != "kafka,node,postgres,redis" {
		t.Fatalf("GET /readyz: %d %s, want 200 ready with kafka, node, postgres and redis checked", code, body)
	}

	key, _ := tron.GenerateKey()
	to := key.Address().String()
	body, _ = json.Marshal(map[string]any{"to": to, "amount_sun": 7_000_000})
	resp, err := http.Post("http://"+s.sim+"/sim/trx/transfer", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var tx struct{ TxID string }
	_ = json.NewDecoder(resp.Body).Decode(&tx)
	resp.Body.Close()
	if resp.StatusCode != 200 || tx.TxID == "" {
		t.Fatalf("sim transfer: %d", resp.StatusCode)
	}

	consume(t, s.kafk, topics.ChainFacts.Name, 20*time.Second, func(r *kgo.Record) bool {
		var f events.ChainFact
		if json.Unmarshal(r.Value, &f) != nil {
			return false
		}
		return f.Kind == events.FactTRXTransfer && f.TxID == tx.TxID && f.To == to && f.AmountSun == 7_000_000 && string(r.Key) == tx.TxID
	})

	// The pricer runs in the stack: prices come from the snapshot it published, with own
	// pool, simulated provider and deep reserve levels in the book, and the same snapshot
	// is on the market-data topic for a reader in another process.
	var book struct {
		Levels []struct{ Class string }
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + s.api + "/v1/orderbook?resource=energy&tier=1h")
		if err == nil {
			code := resp.StatusCode
			_ = json.NewDecoder(resp.Body).Decode(&book)
			resp.Body.Close()
			if code == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/orderbook did not answer 200 within 15 s; log:\n%s", s.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	classes := map[string]bool{}
	for _, l := range book.Levels {
		classes[l.Class] = true
	}
	if !classes["instant"] || !classes["market"] || !classes["deep"] {
		t.Fatalf("order book classes %v, want instant, market and deep", classes)
	}
	consume(t, s.kafk, topics.MarketData.Name, 10*time.Second, func(r *kgo.Record) bool {
		var m events.MarketData
		return json.Unmarshal(r.Value, &m) == nil && string(r.Key) == events.MarketDataKey
	})
	s.stop()
}

// A SIGKILL of the whole dev stack (broker, relay and all) in the middle of a stream of
// outbox writes, then a restart on the same data directory: every event whose transaction
// committed reaches Kafka.
func TestDevStackSIGKILLLosesNoCommittedEvent(t *testing.T) {
	s := newStack(t)
	s.start()
	conn, err := pgx.Connect(context.Background(), s.db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	var (
		mu        sync.Mutex
		committed = map[string]bool{}
		stopWrite = make(chan struct{})
		wrote     = make(chan struct{})
	)
	go func() {
		defer close(wrote)
		for i := 0; ; i++ {
			select {
			case <-stopWrite:
				return
			default:
			}
			env, err := events.New("order.confirmed", "acc_test", network.Mainnet, map[string]any{"order_id": fmt.Sprintf("ord_%d", i%8), "seq": i})
			if err != nil {
				t.Error(err)
				return
			}
			err = pgx.BeginFunc(context.Background(), conn, func(tx pgx.Tx) error { return outbox.Insert(context.Background(), tx, env) })
			if err == nil {
				mu.Lock()
				committed[env.EventID] = true
				mu.Unlock()
			}
		}
	}()
	waitCommitted := func(n int) {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			c := len(committed)
			mu.Unlock()
			if c >= n {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("writer committed fewer than %d events", n)
	}
	waitCommitted(300)
	s.kill()
	waitCommitted(600) // writes go on while the stack is down
	s.start()
	waitCommitted(900)
	close(stopWrite)
	<-wrote

	mu.Lock()
	want := len(committed)
	mu.Unlock()
	seen := map[string]bool{}
	consumeUnchecked(t, s.kafk, topics.OrderEvents.Name, 60*time.Second, func(r *kgo.Record) bool { // hand-made events
		var env events.Envelope
		if json.Unmarshal(r.Value, &env) == nil && committed[env.EventID] {
			seen[env.EventID] = true
		}
		return len(seen) == want
	})
	t.Logf("%d committed events, all on Kafka after SIGKILL and restart", want)
	s.stop()
}
