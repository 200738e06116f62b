// Package layout checks the house rules of docs/architecture.md against the source tree:
// which folder may import which, where SQL may be written, which package owns the writes to
// each table, and where fasthttp may appear. `make lint` runs its tests; a violation names
// the file and the import or statement that breaks the rule.
package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Violation is one broken rule at one place.
type Violation struct {
	File string // slash path relative to the checked root
	Rule string // short name of the rule
	What string // the import path, table or statement at fault
}

func (v Violation) String() string { return v.File + ": " + v.Rule + ": " + v.What }

// Composition packages wire stages together and may import any folder: stage wiring,
// binaries, benchmarks and the test environment. A path matches when it equals a prefix or
// lies below it; `*/cmd/` matches a binary folder under any top-level folder.
var composition = []string{
	"infra/stages",
	"infra/cmd",
	"infra/bench",
	"infra/testenv",
	"edge/cmd",
	"processors/cmd",
	"consumers/cmd",
	"chainwatch/cmd",
}

// Libraries that perform I/O or speak a network protocol; schemas/ imports none of them.
var ioImports = []string{
	"net", "net/http", "os", "os/exec", "database/sql", "syscall",
	"github.com/jackc/", "github.com/redis/", "github.com/go-redis/", "github.com/twmb/",
	"github.com/valyala/", "github.com/fasthttp/", "github.com/prometheus/",
}

// fasthttp is the edge's HTTP server; only the edge and composition packages link it.
var fasthttpImports = []string{"github.com/valyala/fasthttp", "github.com/fasthttp/router"}

var (
	sqlText   = regexp.MustCompile(`\b(SELECT\b[\s\S]*\bFROM\b|INSERT\s+INTO\s|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\s)`)
	writeStmt = regexp.MustCompile(`\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+([a-z_][a-z0-9_]*)`)
	createTbl = regexp.MustCompile(`(?i)CREATE\s+(?:UNLOGGED\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)
)

// Check walks the module rooted at root (the folder holding go.mod) and returns every
// violation, sorted. Test files are exempt: tests may seed any table and read any package.
func Check(root string) ([]Violation, error) {
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	tables, err := knownTables(root)
	if err != nil {
		return nil, err
	}
	var out []Violation
	writers := map[string]map[string][]string{} // table -> package dir -> files
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := pathDir(rel)
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rule := importRule(dir, p, module); rule != "" {
				out = append(out, Violation{File: rel, Rule: rule, What: p})
			}
		}
		full, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(full, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if sqlText.MatchString(s) && top(dir) != "infra" {
				out = append(out, Violation{File: rel, Rule: "SQL outside infra/", What: firstLine(s)})
			}
			if top(dir) == "infra" && !isComposition(dir) && !strings.HasPrefix(dir, "infra/layout") {
				for _, m := range writeStmt.FindAllStringSubmatch(s, -1) {
					if tables[m[1]] {
						if writers[m[1]] == nil {
							writers[m[1]] = map[string][]string{}
						}
						writers[m[1]][dir] = append(writers[m[1]][dir], rel)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	for table, dirs := range writers {
		if len(dirs) < 2 {
			continue
		}
		var names []string
		for d := range dirs {
			names = append(names, d)
		}
		sort.Strings(names)
		for _, d := range names {
			out = append(out, Violation{File: dirs[d][0], Rule: "table written by more than one package",
				What: fmt.Sprintf("%s (writers: %s)", table, strings.Join(names, ", "))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// importRule returns the rule the import p breaks in package folder dir, or "".
func importRule(dir, p, module string) string {
	if matchesAny(p, fasthttpImports) && top(dir) != "edge" && !isComposition(dir) {
		return "fasthttp outside the edge"
	}
	internal := p == module || strings.HasPrefix(p, module+"/")
	target := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
	switch top(dir) {
	case "schemas":
		if internal && top(target) != "schemas" {
			return "schemas/ imports only schemas/"
		}
		if !internal && matchesAny(p, ioImports) {
			return "schemas/ does no I/O"
		}
		return ""
	}
	if !internal || isComposition(dir) {
		return ""
	}
	switch top(dir) {
	case "infra":
		if t := top(target); t != "schemas" && t != "infra" {
			return "infra/ imports only schemas/ and infra/"
		}
		if isComposition(target) {
			return "infra/ imports no composition package"
		}
	case "edge":
		if t := top(target); t != "schemas" && t != "infra" && t != "edge" {
			return "edge/ imports only schemas/, infra/ and edge/"
		}
		if isComposition(target) {
			return "edge/ imports no composition package"
		}
	case "processors", "consumers", "chainwatch":
		t := top(target)
		if t == "edge" {
			return top(dir) + "/ never imports edge/"
		}
		if t != "schemas" && t != "infra" && job(target) != job(dir) {
			return "a job imports no other job"
		}
		if isComposition(target) {
			return top(dir) + "/ imports no composition package"
		}
	}
	return ""
}

// job is the package a job lives in: chainwatch, or processors/X and consumers/X.
func job(dir string) string {
	parts := strings.Split(dir, "/")
	if parts[0] == "chainwatch" || len(parts) < 2 {
		return parts[0]
	}
	return parts[0] + "/" + parts[1]
}

func isComposition(dir string) bool {
	for _, c := range composition {
		if dir == c || strings.HasPrefix(dir, c+"/") {
			return true
		}
	}
	return false
}

func matchesAny(p string, list []string) bool {
	for _, l := range list {
		if p == l || (strings.HasSuffix(l, "/") && strings.HasPrefix(p, l)) || strings.HasPrefix(p, l+"/") {
			return true
		}
	}
	return false
}

func top(dir string) string { return strings.SplitN(dir, "/", 2)[0] }

func pathDir(rel string) string {
	d := filepath.ToSlash(filepath.Dir(rel))
	if d == "." {
		return ""
	}
	return d
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("layout: no module line in %s/go.mod", root)
}

// knownTables reads the table names the migrations create, so a write statement is matched
// only against real tables (a CTE or a temporary name is not a table).
func knownTables(root string) (map[string]bool, error) {
	out := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(root, "infra", "pg", "migrations", "*.sql"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range createTbl.FindAllStringSubmatch(string(b), -1) {
			out[strings.ToLower(m[1])] = true
		}
	}
	return out, nil
}
