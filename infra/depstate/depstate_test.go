package depstate

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// An outage of 1,500 failed calls is two log lines: one when it starts, one when it ends
// with the count.
func TestOneLinePerStateChange(t *testing.T) {
	var buf bytes.Buffer
	tr := New("redis", slog.New(slog.NewTextHandler(&buf, nil)))
	for range 10 {
		tr.Observe(nil)
	}
	for range 1500 {
		tr.Observe(errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"))
	}
	if !tr.Down() {
		t.Fatal("not down")
	}
	tr.Observe(nil)
	tr.Observe(nil)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "redis unavailable") ||
		!strings.Contains(lines[1], "redis available again") || !strings.Contains(lines[1], "failed_calls=1500") {
		t.Fatalf("log:\n%s", buf.String())
	}
}

func TestNothingStored(t *testing.T) {
	if NothingStored(nil) || NothingStored(errors.New("commit: unexpected EOF")) {
		t.Fatal("an unknown outcome counted as nothing stored")
	}
	if !NothingStored(&pgconn.ConnectError{}) {
		t.Fatal("a refused connection is nothing stored")
	}
}
