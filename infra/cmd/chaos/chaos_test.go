package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The chaos soak for two minutes, as `make chaos` runs it: every fault kind at least once
// under steady signed load, at least 20 rentals ending while faults are injected, at least
// 90 % of the deliverable orders delivered, and then not one order lost, duplicated,
// charged twice or wrong, delegated twice or stuck, and no exit of the stack the soak did
// not cause. Then (CHAOS_PLANT=1) the checker itself is tested on the finished soak: one
// defect of every kind is planted into the client's answers, the database, the chain and
// the stack's process, and each must be reported in its column. The soak starts its own
// Postgres cluster, redis-server and dev stack, and ends only those.
func TestChaosSoakTwoMinutes(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "chaos")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CHAOS_DURATION=2m", "CHAOS_PLANT=1") // its work directory is kept only when it fails
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	line := strings.TrimSpace(string(out))
	t.Logf("%s\n%s", stderr.String(), line)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	m := regexp.MustCompile(`^chaos: (\d+) orders, (\d+) faults, (\d+) ended under faults, ([0-9.]+)% delivered \(\d+ refused by faults\), ` +
		`0 lost, 0 duplicated, 0 charged twice, 0 charged wrong, 0 delegated twice, 0 stuck, 0 unexpected exits$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("last line %q: want zeros in every column of findings", line)
	}
	if m[1] == "0" || m[2] == "0" {
		t.Fatalf("last line %q: no orders or no faults", line)
	}
	if n, _ := strconv.Atoi(m[3]); n < 20 {
		t.Errorf("last line %q: %d rentals ended under faults, want at least 20", line, n)
	}
	if p, _ := strconv.ParseFloat(m[4], 64); p < 90 {
		t.Errorf("last line %q: %.1f%% delivered, want at least 90%%", line, p)
	}
	for _, kind := range []string{"sigkill", "pg_restart", "pg_stop", "redis_flush", "redis_restart", "redis_stop", "node_down", "reject", "drop", "fork"} {
		if !strings.Contains(stderr.String(), "fault "+kind+" ") {
			t.Errorf("fault %s was not injected", kind)
		}
	}
	if !strings.Contains(stderr.String(), "planted: every defect kind reported in its column: lost ") {
		t.Errorf("the planted defects were not all reported")
	}
}
