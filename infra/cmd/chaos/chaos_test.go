package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The chaos soak for two minutes, as `make chaos` runs it: every fault kind at least once
// under steady signed load, and then not one order lost, duplicated, charged twice,
// delegated twice or stuck. The soak starts its own Postgres cluster, redis-server and dev
// stack, and ends only those.
func TestChaosSoakTwoMinutes(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "chaos")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CHAOS_DURATION=2m") // its work directory is kept only when it fails
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	line := strings.TrimSpace(string(out))
	t.Logf("%s\n%s", stderr.String(), line)
	if err != nil {
		t.Fatalf("chaos: %v", err)
	}
	m := regexp.MustCompile(`^chaos: (\d+) orders, (\d+) faults, 0 lost, 0 duplicated, 0 charged twice, 0 delegated twice, 0 stuck$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("last line %q: want zeros in every column but N and F", line)
	}
	if m[1] == "0" || m[2] == "0" {
		t.Fatalf("last line %q: no orders or no faults", line)
	}
	for _, kind := range []string{"sigkill", "pg_restart", "pg_stop", "redis_flush", "redis_restart", "redis_stop", "node_down", "reject", "drop", "fork"} {
		if !strings.Contains(stderr.String(), "fault "+kind+" ") {
			t.Errorf("fault %s was not injected", kind)
		}
	}
}
