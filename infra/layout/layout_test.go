package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The repository itself obeys every rule.
func TestRepositoryObeysLayout(t *testing.T) {
	vs, err := Check(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Error(v)
	}
}

// The checker reports a planted violation of each kind, naming the file and the import or
// statement, and stays quiet on the allowed arrows beside them.
func TestCheckerReportsPlantedViolations(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module m\n\ngo 1.26\n")
	write("infra/pg/migrations/00001_init.sql", "-- +goose Up\nCREATE TABLE orders (id bigint);\nCREATE TABLE IF NOT EXISTS fills (id bigint);\n")
	// Violations.
	write("schemas/orders/bad.go", "package orders\nimport (\n\"m/infra/pg\"\n\"net/http\"\n)\nvar _ = pg.X\nvar _ = http.Get\n")
	write("infra/orderstore/bad.go", "package orderstore\nimport \"m/processors/orderflow\"\nvar _ = orderflow.X\nconst q = `INSERT INTO orders (id) VALUES ($1)`\n")
	write("infra/other/bad.go", "package other\nconst q = `UPDATE orders SET id = 1`\n")
	write("edge/orders.go", "package edge\nimport \"m/processors/orderflow\"\nvar _ = orderflow.X\nconst q = \"SELECT id FROM orders WHERE id = $1\"\n")
	write("processors/orderflow/flow.go", "package orderflow\nimport (\n\"m/edge\"\n\"m/chainwatch\"\n\"github.com/valyala/fasthttp\"\n)\nvar X = 1\nvar _ = edge.X\nvar _ = chainwatch.X\nvar _ = fasthttp.X\n")
	write("consumers/crediting/c.go", "package crediting\nimport \"m/infra/stages\"\nvar _ = stages.X\n")
	// Allowed arrows: schemas to schemas, a job to infra and schemas, composition to anything,
	// tests anywhere, the edge to fasthttp, infra to infra.
	write("schemas/events/ok.go", "package events\nimport \"m/schemas/network\"\nvar _ = network.X\n")
	write("processors/pricer/ok.go", "package pricer\nimport (\n\"m/infra/pg\"\n\"m/schemas/orders\"\n)\nvar _ = pg.X\nvar _ = orders.X\n")
	write("infra/stages/ok.go", "package stages\nimport (\n\"m/edge\"\n\"m/processors/orderflow\"\n)\nvar _ = edge.X\nvar _ = orderflow.X\n")
	write("edge/server.go", "package edge\nimport \"github.com/valyala/fasthttp\"\nvar X = 1\nvar _ = fasthttp.X\n")
	write("edge/orders_test.go", "package edge\nimport \"m/processors/orderflow\"\nconst q = \"SELECT 1 FROM orders\"\nvar _ = orderflow.X\n")
	write("infra/ledgerstore/ok.go", "package ledgerstore\nimport \"m/infra/pg\"\nvar _ = pg.X\nconst q = `INSERT INTO fills (id) VALUES (1)`\n")

	vs, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.String())
	}
	want := []string{
		"consumers/crediting/c.go: consumers/ imports no composition package: m/infra/stages",
		"edge/orders.go: SQL outside infra/: SELECT id FROM orders WHERE id = $1",
		"edge/orders.go: edge/ imports only schemas/, infra/ and edge/: m/processors/orderflow",
		"infra/orderstore/bad.go: infra/ imports only schemas/ and infra/: m/processors/orderflow",
		"infra/orderstore/bad.go: table written by more than one package: orders (writers: infra/orderstore, infra/other)",
		"infra/other/bad.go: table written by more than one package: orders (writers: infra/orderstore, infra/other)",
		"processors/orderflow/flow.go: a job imports no other job: m/chainwatch",
		"processors/orderflow/flow.go: fasthttp outside the edge: github.com/valyala/fasthttp",
		"processors/orderflow/flow.go: processors/ never imports edge/: m/edge",
		"schemas/orders/bad.go: schemas/ does no I/O: net/http",
		"schemas/orders/bad.go: schemas/ imports only schemas/: m/infra/pg",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The binaries of the stages that serve no HTTP link neither the edge nor fasthttp.
func TestLeanBinariesLinkNoEdge(t *testing.T) {
	for _, bin := range []string{"./infra/cmd/relay", "./chainwatch/cmd/chainwatch", "./consumers/cmd/crediting", "./consumers/cmd/webhooks"} {
		cmd := exec.Command("go", "list", "-deps", bin)
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", bin, err, out)
		}
		for _, dep := range strings.Split(string(out), "\n") {
			if offending(dep) {
				t.Errorf("%s links %s", bin, dep)
			}
		}
	}
}

func offending(dep string) bool {
	return dep == "rental/edge" || strings.HasPrefix(dep, "rental/edge/") || matchesAny(dep, fasthttpImports)
}

// The link check's matcher catches both the edge and fasthttp, and nothing else.
func TestOffendingDependency(t *testing.T) {
	for dep, want := range map[string]bool{
		"rental/edge": true, "rental/edge/dashboard": true, "github.com/valyala/fasthttp": true,
		"github.com/valyala/fasthttp/fasthttputil": true, "github.com/fasthttp/router": true,
		"rental/edgecase": false, "rental/infra/outbox": false, "net/http": false,
	} {
		if got := offending(dep); got != want {
			t.Errorf("offending(%q) = %v, want %v", dep, got, want)
		}
	}
}
