package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// proc is one child process of the soak: started, signalled and waited for by its own PID
// only. Nothing else on the machine is ever signalled.
type proc struct {
	name    string
	mk      func() *exec.Cmd
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current process has been waited for
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.exited:
		default:
			return fmt.Errorf("%s: already running (pid %d)", p.name, p.cmd.Process.Pid)
		}
	}
	cmd := p.mk()
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	return nil
}

// running reports whether the current process is alive (started and not yet exited).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// exitedCh is closed when the current process exits.
func (p *proc) exitedCh() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// signal sends sig to the process this soak started and waits up to wait for it to exit;
// after that it sends SIGKILL. A process that already exited is left alone.
func (p *proc) signal(sig syscall.Signal, wait time.Duration) {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// ---- Redis ----

// newRedis is a redis-server of the soak's own without persistence: a restart is a Redis
// that kept nothing.
func newRedis(dir string) (*proc, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("redis-server is needed: %w", err)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	p := &proc{name: "redis", logPath: filepath.Join(dir, "redis.log"), mk: func() *exec.Cmd {
		return exec.Command(bin, "--port", port(addr), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	}}
	return p, addr, nil
}

func waitRedis(ctx context.Context, addr string, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(within)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis on %s did not answer within %s: %w", addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- Postgres ----

// pgServer is a Postgres cluster of the soak's own (initdb into the work directory, a free
// loopback port), so that restarting and stopping it never touches a shared server.
type pgServer struct {
	*proc
	addr string
	dir  string // data directory and socket, under the system's temporary directory
}

// findPGBin finds initdb and postgres: on PATH, else the newest /usr/lib/postgresql/*/bin.
func findPGBin() (initdb, postgres string, err error) {
	if i, err1 := exec.LookPath("initdb"); err1 == nil {
		if p, err2 := exec.LookPath("postgres"); err2 == nil {
			return i, p, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- {
		in, pg := filepath.Join(dirs[i], "initdb"), filepath.Join(dirs[i], "postgres")
		if _, err := os.Stat(in); err == nil {
			if _, err := os.Stat(pg); err == nil {
				return in, pg, nil
			}
		}
	}
	return "", "", errors.New("initdb and postgres not found (PATH, /usr/lib/postgresql/*/bin)")
}

// asPostgresUser makes cmd run as the "postgres" system user when the soak runs as root:
// Postgres refuses to run as root. It also gives that user the directories it writes.
func asPostgresUser(cmd *exec.Cmd, dirs ...string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root, and no postgres user to run Postgres as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, d := range dirs {
		if err := os.Chown(d, uid, gid); err != nil {
			return err
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return nil
}

// newPostgres initialises the cluster. Its files live in a directory of their own under
// the system's temporary directory (the postgres user must reach them, and a work directory
// may sit below directories only its owner can enter); its log goes to logDir.
func newPostgres(logDir string) (*pgServer, error) {
	initdb, postgres, err := findPGBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "chaos-pg-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	for _, d := range []string{data, sock} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	if err := asPostgresUser(cmd, data, sock); err != nil {
		return nil, err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &proc{name: "postgres", logPath: filepath.Join(logDir, "postgres.log"), mk: func() *exec.Cmd {
		// fsync off: the faults are process crashes, after which the kernel still has every
		// write; only a machine crash would need fsync, and the soak does not simulate one.
		c := exec.Command(postgres, "-D", data, "-p", port(addr), "-k", sock,
			"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "fsync=off")
		_ = asPostgresUser(c)
		return c
	}}
	return &pgServer{proc: p, addr: addr, dir: dir}, nil
}

func (s *pgServer) url(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.addr, db)
}

func waitPostgres(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := pgx.Connect(ctx, url)
		if err == nil {
			err = c.Ping(ctx)
			c.Close(ctx)
			if err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not answer within %s: %w", within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ---- the dev stack ----

// waitAPI waits until GET /v1/status answers (any status) with a request id.
func waitAPI(ctx context.Context, api string, exited <-chan struct{}, within time.Duration) error {
	deadline := time.Now().Add(within)
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := hc.Get("http://" + api + "/v1/status")
		if err == nil {
			resp.Body.Close()
			if resp.Header.Get("X-Request-Id") != "" {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("the dev stack exited while starting")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API on %s did not answer within %s", api, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
