package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rental/infra/pricecache"
	"rental/infra/pricestore"
	"rental/infra/testenv"
	"rental/schemas/network"
)

// waitLog returns once the log holds want, failing after a minute.
func waitLog(t *testing.T, s *testenv.LogBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(s.String(), want); {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", want, s.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The pricer binary started while Redis is down waits for it (one log line), and once a
// redis-server answers it logs that once and publishes snapshots: to Redis, where a
// subscriber receives one, and to Postgres.
func TestPricerStartedWithRedisDownStartsWhenRedisAnswers(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pricer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build pricer: %v\n%s", err, out)
	}
	db := testenv.Postgres(t)
	redisSrv := testenv.NewRedisServer(t) // not started: Redis is down when the pricer starts
	log := &testenv.LogBuffer{}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+db.URL,
		"REDIS_URL="+redisSrv.URL(),
		"KAFKA_BROKERS="+testenv.Kafka(t),
		"NETWORK=nile",
		"TRON_NODE_URL=http://127.0.0.1:1",
		"PROVIDER_URLS=",
		"PRICER_INTERVAL=200ms",
		// A port of the kernel's choosing: one picked free here could be taken by a
		// parallel test while the pricer waits for Redis (seen in CI).
		"METRICS_ADDR=127.0.0.1:0",
		"LOG_FORMAT=text",
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	waitLog(t, log, "redis unavailable at start; waiting for it")
	if n, err := pricestore.New(db.Pool).LatestSnapshot(context.Background(), network.Nile); err != nil || n != nil {
		t.Fatalf("a snapshot stored before Redis answered (%v): the stage started without it", err)
	}

	redisSrv.Start(true)
	rdb := redisSrv.Client()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sub := rdb.Subscribe(ctx, pricecache.DefaultKey(network.Nile)+":updates")
	defer sub.Close()
	if _, err := sub.ReceiveMessage(ctx); err != nil {
		t.Fatalf("no snapshot published once Redis answered: %v\nlog:\n%s", err, log.String())
	}
	if b, err := pricestore.New(db.Pool).LatestSnapshot(ctx, network.Nile); err != nil || b == nil {
		t.Fatalf("no snapshot in postgres (%v)", err)
	}
	waitLog(t, log, "redis answers; starting")
	if n := strings.Count(log.String(), "redis unavailable at start"); n != 1 {
		t.Fatalf("%d waiting lines, want one:\n%s", n, log.String())
	}
}
