package testenv

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// SharedSpec returns the text of the interface specification kept beside the repository,
// ../shared/spec/rental-api-v1.md next to the directory holding go.mod. The repository's own
// contract (schemas/openapi, schemas/apierr, the event schemas) is what tests check the code
// against; the comparison with that spec runs only where it is present. Where it is absent,
// the calling test is skipped with a message that starts "NOT RUN", so a run without it
// says plainly that the comparison did not happen, and fails in CI (CI set), which always
// has it.
func SharedSpec(t testing.TB) string {
	t.Helper()
	dir := RepoRoot(t)
	path := filepath.Join(dir, "..", "shared", "spec", "rental-api-v1.md")
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && os.Getenv("CI") == "":
		t.Skipf("NOT RUN: ../shared/spec absent (%s); the comparison with the spec beside the repository did not run", path)
	case errors.Is(err, fs.ErrNotExist):
		t.Fatalf("../shared/spec absent (%s): CI must have the spec beside the repository", path)
	case err != nil:
		t.Fatalf("read the spec: %v", err)
	}
	return string(b)
}
