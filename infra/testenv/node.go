package testenv

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RepoRoot returns the directory holding go.mod above the test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// NodeTool returns the absolute path of a command an npm package installed in
// <repository>/<pkgDir>/node_modules/.bin (pinned by that folder's package-lock.json;
// .ci/run runs npm ci there). Node itself must be on PATH. Where the command is missing the
// calling test is skipped with a message that starts "NOT RUN", and fails in CI (CI set).
func NodeTool(t testing.TB, pkgDir, name string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), pkgDir, "node_modules", ".bin", name)
	_, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist) && os.Getenv("CI") == "":
		t.Skipf("NOT RUN: %s is not installed (npm ci in %s)", name, pkgDir)
	case err != nil:
		t.Fatalf("%s is not installed: run npm ci in %s (.ci/run does): %v", name, pkgDir, err)
	}
	return p
}

// TypeScriptBuild compiles the TypeScript package in <repository>/<pkgDir> with its
// tsconfig.json and `tsc --strict` into a folder of its own inside the package (so the
// output resolves the package's node_modules), and returns that folder; it is removed when
// the test ends. Without the package's tools it is NodeTool's NOT RUN, or a failure in CI.
func TypeScriptBuild(t testing.TB, pkgDir string) string {
	t.Helper()
	tsc := NodeTool(t, pkgDir, "tsc")
	pkg := filepath.Join(RepoRoot(t), pkgDir)
	out, err := os.MkdirTemp(pkg, ".build-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	cmd := exec.Command(tsc, "-p", "tsconfig.json", "--strict", "--outDir", out)
	cmd.Dir = pkg
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc --strict in %s: %v\n%s", pkgDir, err, b)
	}
	return out
}
