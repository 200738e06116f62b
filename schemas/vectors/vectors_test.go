package vectors_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func node(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to check the vectors the way a non-Go integrator does: %v", err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// check.mjs, with Node's crypto only, agrees with every published vector.
func TestNodeCryptoAgreesWithThePublishedVectors(t *testing.T) {
	out, err := node(t, "check.mjs")
	if err != nil {
		t.Fatalf("check.mjs: %v\n%s", err, out)
	}
	if n := strings.Count(out, "ok "); n < 20 {
		t.Fatalf("only %d checks ran:\n%s", n, out)
	}
}

// The Node check fails on a wrong vector, so its passing means something.
func TestNodeCheckFailsOnAWrongVector(t *testing.T) {
	for _, c := range []struct{ file, from, to string }{
		{"request-signing.json", `"method": "POST"`, `"method": "PUT"`},
		{"webhook-signing.json", `"valid": false`, `"valid": true`},
	} {
		dir := t.TempDir()
		for _, name := range []string{"request-signing.json", "webhook-signing.json"} {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if name == c.file {
				if !strings.Contains(string(b), c.from) {
					t.Fatalf("%s has no %s", name, c.from)
				}
				b = []byte(strings.Replace(string(b), c.from, c.to, 1))
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if out, err := node(t, "check.mjs", dir); err == nil || !strings.Contains(out, "FAIL") {
			t.Errorf("%s with %s: check passed:\n%s", c.file, c.to, out)
		}
	}
}

// The files are what they say: valid JSON with the fields an integrator reads.
func TestVectorFilesAreWellFormed(t *testing.T) {
	var req struct {
		Vectors []map[string]any `json:"vectors"`
	}
	var wh struct {
		Window     int              `json:"window_seconds"`
		Signatures []map[string]any `json:"signatures"`
		Verify     []map[string]any `json:"verify"`
	}
	for name, v := range map[string]any{"request-signing.json": &req, "webhook-signing.json": &wh} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if len(req.Vectors) < 5 || len(wh.Signatures) < 4 || len(wh.Verify) < 5 || wh.Window != 300 {
		t.Fatalf("%d request vectors, %d webhook signatures, %d verify cases, window %d", len(req.Vectors), len(wh.Signatures), len(wh.Verify), wh.Window)
	}
	for _, v := range req.Vectors {
		for _, f := range []string{"name", "secret", "key_id", "timestamp", "method", "path", "query", "body", "request_target", "canonical", "signature"} {
			if _, ok := v[f].(string); !ok {
				t.Errorf("request vector %v: no %s", v["name"], f)
			}
		}
	}
}
