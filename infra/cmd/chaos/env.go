package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/config"
)

// env is the soak's world: its Postgres, its Redis, the dev stack and what they listen on.
type env struct {
	st  settings
	log *slog.Logger
	dir string

	pg      *pgServer
	redis   *proc
	redisAt string
	stack   *proc
	dbURL   string
	api     string
	sim     string
	cfg     config.Config
	db      *pgxpool.Pool

	stopping  atomic.Bool
	killsSent atomic.Int64
	exits     atomic.Int64
	superDone chan struct{}
}

func startEnv(ctx context.Context, st settings, dir string, log *slog.Logger) (*env, error) {
	e := &env{st: st, log: log, dir: dir}
	var err error
	if e.pg, err = newPostgres(dir); err != nil {
		return nil, err
	}
	if err := e.pg.start(); err != nil {
		return e, err
	}
	e.dbURL = e.pg.url("rental")
	if err := waitPostgres(ctx, e.pg.url("postgres"), 30*time.Second); err != nil {
		return e, err
	}
	log.Info("postgres of the soak's own up", "addr", e.pg.addr, "pid", e.pg.cmd.Process.Pid)
	if e.redis, e.redisAt, err = newRedis(dir); err != nil {
		return e, err
	}
	if err := e.redis.start(); err != nil {
		return e, err
	}
	if err := waitRedis(ctx, e.redisAt, 10*time.Second); err != nil {
		return e, err
	}
	log.Info("redis-server of the soak's own up", "addr", e.redisAt, "pid", e.redis.cmd.Process.Pid)

	bin := st.devstack
	if bin == "" {
		log.Info("building the dev stack")
		if bin, err = buildDevstack(dir); err != nil {
			return e, err
		}
	}
	// The stack's ports are chosen free before it starts; another process on this machine
	// (a parallel test) can take one in between, and the stack then exits at once. A
	// start that exits is tried again on new ports, up to three times.
	began := time.Now()
	for try := 1; ; try++ {
		err := e.startStack(ctx, bin)
		if err == nil {
			break
		}
		if try == 3 || e.stack == nil || e.stack.running() {
			return e, err
		}
		log.Warn("the dev stack exited while starting; starting it again on new ports", "try", try, "err", err)
	}
	log.Info("dev stack up", "api", e.api, "sim", e.sim, "took", time.Since(began).Round(time.Millisecond))
	e.superDone = make(chan struct{})
	go e.supervise(ctx)
	if e.db, err = pgxpool.New(ctx, e.dbURL); err != nil {
		return e, err
	}
	return e, nil
}

// startStack starts the dev stack binary once on fresh free ports, with the soak's own
// Postgres and Redis, and waits for its API; the soak loads the same configuration.
func (e *env) startStack(ctx context.Context, bin string) error {
	var err error
	addrs := make([]string, 4)
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return err
		}
	}
	e.api, e.sim = addrs[0], addrs[1]
	vars := map[string]string{
		"DATABASE_URL":          e.dbURL,
		"REDIS_URL":             "redis://" + e.redisAt + "/0",
		"HTTP_ADDR":             e.api,
		"SIM_ADDR":              e.sim,
		"PROVIDER_SIM_ADDR":     addrs[2],
		"KAFKA_BROKERS":         addrs[3],
		"METRICS_ADDR":          "off",
		"DATA_DIR":              filepath.Join(e.dir, "data"),
		"SIM_BLOCK_INTERVAL":    e.st.blockInterval.String(),
		"CONFIRMATIONS":         fmt.Sprint(e.st.confirmations),
		"DEV_SHORT_RENTAL":      e.st.shortRental.String(),
		"CHAIN_POLL_INTERVAL":   "200ms",
		"OUTBOX_SWEEP_INTERVAL": "200ms",
		"PRICER_INTERVAL":       "1s",
		"API_KEY_MASTER_KEY":    randomHex(32),
	}
	stackEnv := os.Environ()
	for k, v := range vars {
		stackEnv = append(stackEnv, k+"="+v) // the last of a repeated name wins
		// The soak reads the same configuration (network, master key) as the stack.
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	if e.cfg, err = config.Load(); err != nil {
		return err
	}
	e.stack = &proc{name: "devstack", logPath: filepath.Join(e.dir, "devstack.log"), mk: func() *exec.Cmd {
		c := exec.Command(bin)
		c.Env = stackEnv
		return c
	}}
	if err := e.stack.start(); err != nil {
		return err
	}
	if err := waitAPI(ctx, e.api, e.stack.exitedCh(), 90*time.Second); err != nil {
		return err
	}
	return nil
}

// supervise starts the dev stack again whenever it exits (a kill of the soak or a crash of
// its own), as a process supervisor would.
func (e *env) supervise(ctx context.Context) {
	defer close(e.superDone)
	for {
		select {
		case <-e.stack.exitedCh():
		case <-ctx.Done():
			return
		}
		if e.stopping.Load() || ctx.Err() != nil {
			return
		}
		n := e.exits.Add(1)
		if n > e.killsSent.Load() {
			e.log.Warn("the dev stack exited by itself; starting it again", "log", e.stack.logPath, "tail", tail(e.stack.logPath, 600))
		}
		for e.stack.start() != nil {
			time.Sleep(time.Second)
		}
		time.Sleep(500 * time.Millisecond) // a stack failing at start is not restarted in a hot loop
	}
}

// kill sends SIGKILL to the dev stack (the supervisor starts it again) and returns when the
// API answers again.
func (e *env) killStack(ctx context.Context) error {
	e.killsSent.Add(1)
	e.stack.signal(syscall.SIGKILL, 10*time.Second)
	return e.waitRestarted(ctx)
}

// waitRestarted waits for the supervisor to start the stack again and for its API.
func (e *env) waitRestarted(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for !e.stack.running() {
		if time.Now().After(deadline) {
			return fmt.Errorf("the dev stack was not restarted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return waitAPI(ctx, e.api, make(chan struct{}), 90*time.Second)
}

func (e *env) close() {
	e.stopping.Store(true)
	if e.db != nil {
		e.db.Close()
	}
	if e.stack != nil {
		e.stack.signal(syscall.SIGTERM, 30*time.Second)
	}
	if e.redis != nil {
		e.redis.signal(syscall.SIGKILL, 5*time.Second)
	}
	if e.pg != nil {
		e.pg.signal(syscall.SIGINT, 30*time.Second)
	}
}

// sim calls the simulator's control API (POST when in is not nil).
func (e *env) simCall(ctx context.Context, path string, in, out any) error {
	method, body := http.MethodGet, []byte(nil)
	if in != nil {
		method = http.MethodPost
		body, _ = json.Marshal(in)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+e.sim+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// simCallRetry repeats simCall until it works or within passes (the simulator is down
// while the stack restarts).
func (e *env) simCallRetry(ctx context.Context, within time.Duration, path string, in, out any) error {
	deadline := time.Now().Add(within)
	for {
		err := e.simCall(ctx, path, in, out)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
