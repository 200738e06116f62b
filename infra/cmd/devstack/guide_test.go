package main_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rental/infra/testenv"
	"rental/schemas/eventschema"
)

// guideScript is docs/integrating.md's `sh` blocks, in page order, as one script.
func guideScript(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur *strings.Builder
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case cur == nil && line == "```sh":
			cur = &strings.Builder{}
		case cur != nil && line == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if cur != nil || len(blocks) < 6 {
		t.Fatalf("docs/integrating.md: %d sh blocks, an unclosed one %v", len(blocks), cur != nil)
	}
	return strings.Join(blocks, "\n")
}

// docs/integrating.md works as written: its shell steps, run top to bottom by bash on a fresh
// dev stack with the stack's own confirmation depth and block interval (no CONFIRMATIONS or
// SIM_BLOCK_INTERVAL override), go from a throwaway owner key to a verified order.confirmed
// webhook. The script asserts each step itself (set -e, jq -e); the test then reads what
// the guide's receiver printed: every event verified, each passing its JSON Schema, the
// deposit's balance.credited and the order's order.confirmed among them.
func TestIntegratingGuide(t *testing.T) {
	t.Parallel() // a stack of its own: runs beside the other parallel test of the package
	for _, tool := range []string{"bash", "curl", "openssl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("docs/integrating.md needs %s (apt-get install -y %s)", tool, tool)
		}
	}
	script := guideScript(t)
	s := newStack(t)
	var env []string
	for _, kv := range s.env {
		if !strings.HasPrefix(kv, "CONFIRMATIONS=") && !strings.HasPrefix(kv, "SIM_BLOCK_INTERVAL=") {
			env = append(env, kv)
		}
	}
	s.env = env
	s.start()

	work := t.TempDir()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = "../../.." // the repository's root, where the guide's commands run
	cmd.Env = append(os.Environ(), "BASE=http://"+s.api, "SIM=http://"+s.sim, "HOOK_ADDR="+testenv.FreeAddr(t), "WORK="+work)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the receiver it starts goes with it
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			receiverLog, _ := os.ReadFile(filepath.Join(work, "receiver.log"))
			t.Fatalf("the guide's script failed: %v\n%s\nreceiver:\n%s\ndev stack:\n%s", err, out.String(), receiverLog, s.log)
		}
	case <-time.After(4 * time.Minute):
		t.Fatalf("the guide's script did not finish within 4 minutes:\n%s", out.String())
	}
	t.Logf("the guide ran in %s; its output:\n%s", time.Since(began).Round(time.Second), out.String())

	f, err := os.Open(filepath.Join(work, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, err := eventschema.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		env, err := set.Envelope(sc.Bytes())
		if err != nil {
			t.Errorf("delivered event breaks its schema: %v: %s", err, sc.Bytes())
			continue
		}
		if env.Test {
			seen["test "+env.Event]++
		} else {
			seen[env.Event]++
		}
	}
	if seen["test order.confirmed"] < 1 || seen["balance.credited"] != 1 || seen["order.confirmed"] != 1 {
		t.Fatalf("events the receiver verified: %v; want the test delivery, one balance.credited and one order.confirmed", seen)
	}
}
