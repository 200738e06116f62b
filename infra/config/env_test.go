package config

import (
	"strings"
	"testing"
	"time"
)

// Every refused value is reported at once, by name, and leaves its default.
func TestEnvCollectsEveryRefusal(t *testing.T) {
	t.Setenv("ENVTEST_WAIT", "soon")
	t.Setenv("ENVTEST_WORKERS", "0")
	t.Setenv("ENVTEST_DEPTH", "3")
	t.Setenv("ENVTEST_ON", "yes")
	e := NewEnv()
	if d := e.Duration("ENVTEST_WAIT", time.Second); d != time.Second {
		t.Fatalf("refused duration gave %v, want the default", d)
	}
	if n := e.PositiveInt("ENVTEST_WORKERS", 4); n != 4 {
		t.Fatalf("refused 0 gave %d, want the default", n)
	}
	if n := e.Int("ENVTEST_DEPTH", 0); n != 3 {
		t.Fatalf("Int read %d, want 3", n)
	}
	if e.Bool("ENVTEST_ON", false) {
		t.Fatal(`"yes" read as true`)
	}
	if e.Str("ENVTEST_UNSET", "def") != "def" {
		t.Fatal("unset variable did not give its default")
	}
	err := e.Err()
	if err == nil {
		t.Fatal("no error for three refused values")
	}
	for _, want := range []string{`ENVTEST_WAIT="soon"`, `ENVTEST_WORKERS="0": want a positive integer`, `ENVTEST_ON="yes"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if NewEnv().Err() != nil {
		t.Fatal("an Env that refused nothing has an error")
	}
}
