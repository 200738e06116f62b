// Package depstate follows the state of a dependency (Postgres, Redis, Kafka, the node)
// from the errors its callers meet, logs ONE line per change of state with how many calls
// failed meanwhile (not one warning per failed call), and tells an error that proves
// nothing reached the store (NothingStored) from one whose outcome is unknown.
package depstate

import (
	"errors"
	"log/slog"
	"net"
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
// connection could not be made (Postgres refusing connections, Redis down) or the
// statement was never sent (pgconn.SafeToRetry). A request whose only failure is such an
// error changed nothing in that call, so it may be answered "retry later" (9003) rather
// than "outcome unknown" (9000). An error after a statement was sent (a COMMIT whose
// answer was lost) is not such an error.
func NothingStored(err error) bool {
	if err == nil {
		return false
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
