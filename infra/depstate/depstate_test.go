package depstate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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

// A session the server ended (57P01, as a Postgres shutdown does) counts as nothing stored
// only in a transaction marked Uncommitted; other errors keep their meaning there.
func TestNothingStoredBeforeCommit(t *testing.T) {
	shutdown := fmt.Errorf("insert: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"})
	if NothingStored(shutdown) {
		t.Fatal("a session ended at an unknown point (COMMIT included) counted as nothing stored")
	}
	if !NothingStored(Uncommitted(shutdown)) {
		t.Fatal("a session ended before COMMIT was sent is nothing stored")
	}
	if !NothingStored(Uncommitted(fmt.Errorf("read: %w", io.ErrUnexpectedEOF))) {
		t.Fatal("a connection broken before COMMIT was sent is nothing stored")
	}
	if NothingStored(Uncommitted(&pgconn.PgError{Code: "23505"})) || NothingStored(Uncommitted(errors.New("a defect"))) {
		t.Fatal("an error that is not a lost session counted as a dependency outage")
	}
	if Uncommitted(nil) != nil {
		t.Fatal("Uncommitted(nil) is not nil")
	}
}
