// Package depstate follows the state of a dependency (Postgres, Redis, Kafka, the node)
// from the errors its callers meet, logs ONE line per change of state with how many calls
// failed meanwhile (not one warning per failed call), and tells an error that proves
// nothing reached the store (NothingStored) from one whose outcome is unknown.
package depstate

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Tracker is one dependency's state. The zero value is not usable; use New.
type Tracker struct {
	name     string
	log      *slog.Logger
	down     atomic.Bool
	mu       sync.Mutex
	since    time.Time
	failures int64
	lastErr  string
	now      func() time.Time
}

// New returns a tracker of the dependency name ("redis", "postgres") logging to log.
func New(name string, log *slog.Logger) *Tracker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Tracker{name: name, log: log, now: time.Now}
}

// Observe records one call's outcome: err nil is a success. The first failure after a
// success logs "<name> unavailable"; the first success after failures logs "<name>
// available again" with the count of failed calls and the outage's length.
func (t *Tracker) Observe(err error) {
	if err == nil && !t.down.Load() {
		return // the common case: no lock
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case err != nil && !t.down.Load():
		t.down.Store(true)
		t.since, t.failures, t.lastErr = t.now(), 1, err.Error()
		t.log.Warn(t.name+" unavailable", "dependency", t.name, "err", err)
	case err != nil:
		t.failures++
		t.lastErr = err.Error()
	case t.down.Load():
		t.down.Store(false)
		t.log.Info(t.name+" available again", "dependency", t.name, "failed_calls", t.failures,
			"down_for", t.now().Sub(t.since).Round(time.Millisecond).String(), "last_err", t.lastErr)
	}
}

// Down reports whether the last observed call failed.
func (t *Tracker) Down() bool { return t.down.Load() }

// NothingStored reports whether err proves that the failed call reached no store: the
// connection could not be made (Postgres refusing connections, Redis down), the statement
// was never sent (pgconn.SafeToRetry), or the session was lost (the server ended it, as a
// Postgres shutdown or restart does, or the connection broke) in a transaction marked
// Uncommitted, whose COMMIT was never sent, so the server rolled it back. A request whose only failure is such an
// error changed nothing in that call, so it may be answered "retry later" (9003) rather
// than "outcome unknown" (9000). An error after a statement was sent (a COMMIT whose
// answer was lost) is not such an error.
func NothingStored(err error) bool {
	if err == nil {
		return false
	}
	var u uncommitted
	if errors.As(err, &u) && sessionLost(err) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return pgconn.SafeToRetry(err)
}

// uncommitted marks an error a transaction met before its COMMIT was sent.
type uncommitted struct{ error }

func (u uncommitted) Unwrap() error { return u.error }

// Uncommitted marks err (nil stays nil) as met by a transaction before its COMMIT was
// sent: the transaction's writes did not take effect. NothingStored then counts a lost
// session as nothing stored; any other error keeps its meaning (a defect stays 9000).
func Uncommitted(err error) error {
	if err == nil {
		return nil
	}
	return uncommitted{err}
}

// sessionLost reports an error that ended the database session: the server's own
// termination (SQLSTATE class 57P: admin shutdown, crash shutdown, cannot connect now;
// class 08: connection exception) or a broken connection (network error, EOF).
func sessionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "57P") || strings.HasPrefix(pe.Code, "08")
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}
