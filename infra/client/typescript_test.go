package client

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rental/infra/testenv"
)

// tsDir is the TypeScript client's package (docs/integrating.md "TypeScript").
const tsDir = "infra/client/typescript"

// The TypeScript client is generated from the OpenAPI document as it is now (its
// src/schema.d.ts is what openapi-typescript writes from schemas/openapi/openapi.yaml),
// compiles with tsc --strict, and signs requests and verifies webhooks exactly as the
// published vectors say (schemas/vectors), run with Node.
func TestTypeScriptClient(t *testing.T) {
	gen := testenv.NodeTool(t, tsDir, "openapi-typescript")
	root := testenv.RepoRoot(t)
	pkg := filepath.Join(root, tsDir)
	fresh := filepath.Join(t.TempDir(), "schema.d.ts")
	cmd := exec.Command(gen, filepath.Join(root, "schemas/openapi/openapi.yaml"), "--output", fresh)
	cmd.Dir = pkg
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, b)
	}
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(pkg, "src", "schema.d.ts"))
	if !bytes.Equal(got, want) {
		t.Errorf("%s/src/schema.d.ts is not what openapi-typescript generates from the document; run `npm run generate` there", tsDir)
	}

	out := testenv.TypeScriptBuild(t, tsDir)
	run := exec.Command("node", filepath.Join(out, "test", "vectors.js"), filepath.Join(root, "schemas", "vectors"))
	b, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the TypeScript client against the vectors: %v\n%s", err, b)
	}
	if n := strings.Count(string(b), "ok "); n < 30 {
		t.Fatalf("only %d vector checks ran:\n%s", n, b)
	}
}
