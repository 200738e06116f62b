package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Item is a delivery in the queue (table webhook_queue). Only the head of its ordering key
// (lowest Seq for the account and OKey) is ever attempted.
type Item struct {
	Seq         int64
	AccountID   string
	OKey        string
	EventID     string
	EventType   string
	Body        []byte
	MaxAttempts int
	Role        string
	Attempt     int // attempts made on Role
	DueAt       time.Time
}

const itemCols = `seq, account_id, okey, event_id, event_type, body, max_attempts, role, attempt, due_at`

func scanItem(row pgx.Row) (Item, error) {
	var it Item
	err := row.Scan(&it.Seq, &it.AccountID, &it.OKey, &it.EventID, &it.EventType, &it.Body, &it.MaxAttempts, &it.Role, &it.Attempt, &it.DueAt)
	return it, err
}

// Enqueue adds a delivery behind the others of its key. A second Enqueue of the same event
// (Kafka redelivery after a crash) changes nothing, whether the delivery is still queued or
// already finished: re-queueing a finished one would send it again after later events of
// its key.
func (s *Store) Enqueue(ctx context.Context, it Item) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO webhook_queue (account_id, okey, event_id, event_type, body, max_attempts, role)
		SELECT $1, $2, $3, $4, $5, $6, $7
		WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE event_id = $3 AND next IN ('done', 'dead'))
		ON CONFLICT (event_id) DO NOTHING`,
		it.AccountID, it.OKey, it.EventID, it.EventType, it.Body, it.MaxAttempts, it.Role)
	return err
}

// Head is the delivery of the key that goes next; ok is false when the key has none.
func (s *Store) Head(ctx context.Context, accountID, okey string) (Item, bool, error) {
	it, err := scanItem(s.pool.QueryRow(ctx, `SELECT `+itemCols+` FROM webhook_queue
		WHERE account_id = $1 AND okey = $2 ORDER BY seq LIMIT 1`, accountID, okey))
	if errors.Is(err, pgx.ErrNoRows) {
		return Item{}, false, nil
	}
	return it, err == nil, err
}

// ClaimResult says whether an attempt may be made.
type ClaimResult int

const (
	Claimed ClaimResult = iota // the attempt is ours for the lease
	Stale                      // the attempt was made already, or the delivery is gone or moved on
	Busy                       // another worker holds the lease for this very attempt
	Behind                     // the worker that produced this wake-up is alive and has not committed yet
)

// Claim takes the lease for attempt n of eventID on role. The attempt must be the next one
// of the row (attempt n-1 made) and the row the head of its key. The lease lets duplicate
// wake-ups of one attempt skip it while it runs, and lets a retry after a crash go ahead
// once it expires.
func (s *Store) Claim(ctx context.Context, eventID, role string, n int, lease time.Duration) (Item, ClaimResult, error) {
	it, err := scanItem(s.pool.QueryRow(ctx, `
		UPDATE webhook_queue q SET claim_attempt = $3, claim_until = now() + $4::interval
		WHERE q.event_id = $1 AND q.role = $2 AND q.attempt = $3 - 1
		  AND (q.claim_until IS NULL OR q.claim_until < now() OR q.claim_attempt <> $3)
		  AND q.seq = (SELECT min(h.seq) FROM webhook_queue h WHERE h.account_id = q.account_id AND h.okey = q.okey)
		RETURNING `+itemCols, eventID, role, n, lease))
	if err == nil {
		return it, Claimed, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return Item{}, 0, err
	}
	var curRole string
	var attempt, claimAttempt int
	var leased bool
	err = s.pool.QueryRow(ctx, `SELECT role, attempt, claim_attempt, COALESCE(claim_until > now(), false)
		FROM webhook_queue WHERE event_id = $1`, eventID).Scan(&curRole, &attempt, &claimAttempt, &leased)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Item{}, Stale, nil
	case err != nil:
		return Item{}, 0, err
	case curRole != role || attempt >= n:
		return Item{}, Stale, nil
	case attempt < n-1 && leased && claimAttempt == n-1:
		// The worker making attempt n-1 produced this wake-up and has not committed yet.
		return Item{}, Behind, nil
	case attempt < n-1:
		// Its writer died before committing: the record that made it do attempt n-1 is
		// redelivered, redoes that attempt and produces a new wake-up. Waiting for this
		// one could block its partition behind a delivery that can never catch up.
		return Item{}, Stale, nil
	case leased && claimAttempt == n:
		return Item{}, Busy, nil
	}
	return Item{}, Stale, nil // not the head of its key: the head's completion starts it
}

// Attempt is one attempt's record for the history.
type Attempt struct {
	DeliveryID    string
	EndpointID    string // "" when no endpoint held the role (nothing was sent)
	AccountID     string
	EventID       string
	EventType     string
	Role          string
	Number        int
	Succeeded     bool
	HTTPStatus    *int
	Error         *string
	Latency       time.Duration
	Next          string // done, retry, failover, dead
	NextAttemptAt *time.Time
}

// The endpoint may have been deleted while the attempt ran; its history went with it.
const insertAttempt = `INSERT INTO webhook_deliveries (id, endpoint_id, account_id, event_id, event_type, role,
		attempt, status, http_status, error, latency_ms, next, next_attempt_at)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
	WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE id = $2)
	ON CONFLICT (id) DO NOTHING`

func attemptArgs(a Attempt) []any {
	status := "failed"
	if a.Succeeded {
		status = "succeeded"
	}
	return []any{a.DeliveryID, a.EndpointID, a.AccountID, a.EventID, a.EventType, a.Role, a.Number, status,
		a.HTTPStatus, a.Error, int(a.Latency.Milliseconds()), a.Next, a.NextAttemptAt}
}

func queueAttempt(b *pgx.Batch, a Attempt) { b.Queue(insertAttempt, attemptArgs(a)...) }

func recordAttempt(ctx context.Context, tx Querier, a Attempt) error {
	if a.EndpointID == "" {
		return nil
	}
	_, err := tx.Exec(ctx, insertAttempt, attemptArgs(a)...)
	return err
}

// Retry records a failed attempt n with more to come: the next one is due at due.
func (s *Store) Retry(ctx context.Context, a Attempt, due time.Time) error {
	return s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE webhook_queue SET attempt = $3, due_at = $4, claim_until = NULL
			WHERE event_id = $1 AND role = $2 AND attempt < $3`, a.EventID, a.Role, a.Number, due); err != nil {
			return err
		}
		return recordAttempt(ctx, tx, a)
	})
}

// Failover records the last failed attempt on the primary and moves the delivery to the
// backup, where the schedule starts again.
func (s *Store) Failover(ctx context.Context, a Attempt, to string) error {
	return s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE webhook_queue SET role = $3, attempt = 0, due_at = now(), claim_until = NULL
			WHERE event_id = $1 AND role = $2`, a.EventID, a.Role, to); err != nil {
			return err
		}
		return recordAttempt(ctx, tx, a)
	})
}

// Finish records the last attempt (delivered or dead) and removes the delivery from the
// queue, which makes the next delivery of its key the head.
func (s *Store) Finish(ctx context.Context, a Attempt) error {
	return s.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_queue WHERE event_id = $1`, a.EventID); err != nil {
			return err
		}
		return recordAttempt(ctx, tx, a)
	})
}

// Record adds an attempt to the history of a delivery that never entered the queue (its
// first attempt succeeded).
//
// The row is committed without waiting for the WAL flush (synchronous_commit off, for this
// transaction only): it is history, not state, and a database crash can lose at most the
// last moments of it, while waiting for the flush would make every delivery wait for a
// disk write. Queue state changes are never written this way.
func (s *Store) Record(ctx context.Context, a Attempt) error {
	if a.EndpointID == "" {
		return nil
	}
	// One round trip: the four statements are pipelined.
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL synchronous_commit TO OFF`)
	queueAttempt(b, a)
	b.Queue(`COMMIT`)
	return s.pool.SendBatch(ctx, b).Close()
}

// Prepare reads, in one round trip, what a new event needs: the account's endpoints with
// their secrets, by role, and whether its key has deliveries waiting (a new event of the
// key must then wait behind them).
func (s *Store) Prepare(ctx context.Context, accountID, okey string) (map[string]Target, bool, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT `+endpointCols+`, secret_enc, EXISTS (SELECT 1 FROM webhook_queue WHERE account_id = $1 AND okey = $2)
		FROM webhook_endpoints WHERE account_id = $1`, accountID, okey)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	out := map[string]Target{}
	var queued bool
	for rows.Next() {
		var sealed []byte
		e, err := scanEndpoint(rows, &sealed, &queued)
		if err != nil {
			return nil, false, err
		}
		t, err := s.open(e, sealed)
		if err != nil {
			return nil, false, err
		}
		out[e.Role] = t
	}
	return out, queued, rows.Err()
}

// Release gives up the lease of attempt n without recording anything (the attempt was
// abandoned at shutdown), so the next worker need not wait for the lease to run out.
func (s *Store) Release(ctx context.Context, eventID string, n int) error {
	_, err := s.pool.Exec(ctx, `UPDATE webhook_queue SET claim_until = NULL WHERE event_id = $1 AND claim_attempt = $2`, eventID, n)
	return err
}

// OrderTier is the tier of an order, for order events whose data does not carry it
// (order.expired, order.reclaimed and order.refunded list no tier in the spec): it decides
// the 5m-tier attempt limit. It reads the orders table of the order stage (issue 6); ""
// when the order or the table is not there (the full schedule then applies).
func (s *Store) OrderTier(ctx context.Context, orderID string) (string, error) {
	var tier *string
	err := s.pool.QueryRow(ctx, `SELECT tier FROM orders WHERE id = $1`, orderID).Scan(&tier)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return "", nil
	case err != nil:
		return "", err
	case tier == nil:
		return "", nil
	}
	return *tier, nil
}

// HistoryRetention is how long delivery history is kept. It outlives the event topics'
// retention (30 days), because Enqueue relies on a delivered event's rows to ignore a
// re-read of that event.
const HistoryRetention = 35 * 24 * time.Hour

// PruneHistory deletes delivery history older than olderThan, in bounded chunks so that no
// statement holds long locks; it returns how many rows went.
func (s *Store) PruneHistory(ctx context.Context, olderThan time.Duration) (int64, error) {
	const chunk = 5000
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE id IN (
			SELECT id FROM webhook_deliveries WHERE attempted_at < now() - $1::interval LIMIT $2)`, olderThan, chunk)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < chunk {
			return total, nil
		}
	}
}
