package stages

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The stage binaries that serve no HTTP API link no part of it: neither the edge packages
// nor fasthttp end up in the relay, chainwatch, crediting or webhook delivery binaries, so
// each links only what its stage needs (each stage's wiring lives in its own package).
func TestStageBinariesLinkNoEdge(t *testing.T) {
	for _, bin := range []string{
		"rental/infra/cmd/relay",
		"rental/chainwatch/cmd/chainwatch",
		"rental/consumers/cmd/crediting",
		"rental/consumers/cmd/webhooks",
	} {
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps", bin).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", bin, err, out)
		}
		var deps int
		for _, dep := range strings.Fields(string(out)) {
			deps++
			if dep == "rental/edge" || strings.HasPrefix(dep, "rental/edge/") || strings.Contains(dep, "github.com/valyala/fasthttp") {
				t.Errorf("%s links %s", bin, dep)
			}
		}
		if deps < 10 {
			t.Fatalf("go list -deps %s listed only %d packages: %s", bin, deps, out)
		}
	}
}
