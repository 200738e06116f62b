package webhookdelivery_test

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"rental/infra/webhooks"
)

func buildDeliverer(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build the deliverer binary: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "webhooks")
	if out, err := exec.Command(goBin, "build", "-o", bin, "rental/consumers/cmd/webhooks").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// delivererProcess starts the binary operators run; its log is shown if the test fails.
func delivererProcess(t *testing.T, bin string, e *env, name string) *exec.Cmd {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+e.db.URL, "KAFKA_BROKERS="+e.broker, "METRICS_ADDR=off",
		"API_KEY_MASTER_KEY="+hex.EncodeToString(testMasterKey), "BRAND="+testBrand, "WEBHOOK_ALLOW_LOOPBACK=true",
		"WEBHOOK_RETRY_DELAYS=100ms,200ms,300ms,400ms,500ms,600ms,700ms,800ms,900ms")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // this process only, by PID
			_ = cmd.Wait()
		}
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, b)
		}
	})
	return cmd
}

// A SIGKILL of the deliverer mid-stream (retries in flight) loses nothing: after a
// restart every event is delivered at least once.
func TestEveryEventDeliveredAcrossSIGKILL(t *testing.T) {
	bin := buildDeliverer(t)
	e := newEnv(t)
	e.endpoint(t, webhooks.RolePrimary, "/hook")
	var n atomic.Int64
	// One answer in four fails, so retries are in the delay topics when the kill lands.
	e.rcv.Answer = func(received) int {
		if n.Add(1)%4 == 0 {
			return 500
		}
		return 200
	}
	const total = 400
	ids := make([]string, 0, total)
	for i := 0; i < total; i++ {
		ids = append(ids, e.publish(t, "order.confirmed", map[string]any{"order_id": fmt.Sprintf("ord_%d", i%40), "seq": i / 40, "tier": "1h"}).EventID)
	}
	first := delivererProcess(t, bin, e, "first")
	waitFor(t, 60*time.Second, "a third of the events", func() bool { return len(e.rcv.requests()) >= total/3 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	atKill := len(e.rcv.requests())
	t.Logf("SIGKILL after %d requests", atKill)

	second := delivererProcess(t, bin, e, "second")
	delivered := func() map[string]bool {
		ok := map[string]bool{}
		for _, r := range e.rcv.requests() {
			if r.Answered == 200 {
				ok[r.EventID] = true
			}
		}
		return ok
	}
	waitFor(t, 150*time.Second, "every event delivered", func() bool { return len(delivered()) == total })
	got := delivered()
	for _, id := range ids {
		if !got[id] {
			t.Errorf("event %s never delivered", id)
		}
	}
	if atKill >= total {
		t.Errorf("the kill did not land mid-stream (%d requests before it)", atKill)
	}
	t.Logf("%d requests in all for %d events", len(e.rcv.requests()), total)
	_ = second.Process.Signal(syscall.SIGTERM)
	_ = second.Wait()
}
