package webhooks

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"rental/infra/accounts"
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

// Queued is what EnqueueNew did.
type Queued struct {
	// Role is the role the delivery starts on; "" when no endpoint wants the event
	// (nothing was queued).
	Role string
	// Claimed: the delivery was queued as the head of its key with the lease of its first
	// attempt taken (claim was asked for); Item and Targets are then what the attempt needs.
	Claimed bool
	Item    Item
	Targets map[string]Target
	// Err is a failure to open an endpoint's secret; the delivery is queued (and claimed)
	// all the same.
	Err error
}

// NewDelivery is a new event to queue: it.Role is ignored (EnqueueNew picks it), Claim asks
// for its first attempt to be claimed when it is the only delivery of its key.
type NewDelivery struct {
	Item  Item
	Claim bool
}

const enqueueNew = `WITH r AS (
		SELECT role FROM webhook_endpoints
		WHERE account_id = $1 AND is_active AND (events IS NULL OR $4 = ANY (events))
		ORDER BY role = 'backup' LIMIT 1
	), c AS (
		SELECT $7::boolean AND NOT EXISTS (SELECT 1 FROM webhook_queue WHERE account_id = $1 AND okey = $2) AS claim
	), q AS (
		INSERT INTO webhook_queue (account_id, okey, event_id, event_type, body, max_attempts, role, claim_attempt, claim_until)
		SELECT $1, $2, $3, $4, $5, $6, r.role, CASE WHEN c.claim THEN 1 ELSE 0 END,
		       CASE WHEN c.claim THEN now() + $8::interval END
		FROM r, c
		WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries WHERE event_id = $3 AND next IN ('done', 'dead'))
		ON CONFLICT (event_id) DO NOTHING
		RETURNING seq, due_at, claim_attempt = 1 AS claimed
	)
	SELECT r.role, q.seq, q.due_at, COALESCE(q.claimed, false),
	       e.id, e.url, e.events, e.role, e.is_active, e.created_at, e.updated_at, e.secret_enc
	FROM r LEFT JOIN q ON true
	LEFT JOIN webhook_endpoints e ON e.account_id = $1 AND COALESCE(q.claimed, false)`

// EnqueueNew queues new events, each on the role it starts on: the primary when it is
// active and subscribes to the event's type, else the backup under the same conditions;
// an event no endpoint wants queues nothing (its Role is ""). Like Enqueue, a second call
// for the same event changes nothing. With Claim, a delivery that is the only one of its
// key is queued with the lease of its first attempt taken, and the account's endpoints
// with their secrets are returned for it, as ClaimHead would. All of them in one round
// trip and one transaction (one WAL flush), in the order given; one statement each.
func (s *Store) EnqueueNew(ctx context.Context, ds []NewDelivery, lease time.Duration) ([]Queued, error) {
	b := &pgx.Batch{}
	if len(ds) > 1 {
		b.Queue(`BEGIN`)
	}
	for _, d := range ds {
		it := d.Item
		b.Queue(enqueueNew, it.AccountID, it.OKey, it.EventID, it.EventType, it.Body, it.MaxAttempts, d.Claim, lease)
	}
	if len(ds) > 1 {
		b.Queue(`COMMIT`)
	}
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	if len(ds) > 1 {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	// Secrets are opened only once the transaction is committed: a failure to open one
	// concerns its own delivery, not the others.
	type sealedTarget struct {
		e      Endpoint
		sealed []byte
	}
	out := make([]Queued, len(ds))
	sealed := make([][]sealedTarget, len(ds))
	for i, d := range ds {
		rows, err := br.Query()
		if err != nil {
			return nil, err
		}
		q := Queued{Item: d.Item}
		for rows.Next() {
			var seq *int64
			var due *time.Time
			var id, url, role *string
			var evs []string
			var active *bool
			var created, updated *time.Time
			var sec []byte
			if err := rows.Scan(&q.Role, &seq, &due, &q.Claimed, &id, &url, &evs, &role, &active, &created, &updated, &sec); err != nil {
				rows.Close()
				return nil, err
			}
			if seq != nil {
				q.Item.Seq, q.Item.DueAt = *seq, *due
			}
			if id != nil {
				sealed[i] = append(sealed[i], sealedTarget{Endpoint{ID: *id, AccountID: d.Item.AccountID, URL: *url, Events: evs,
					Role: *role, IsActive: *active, CreatedAt: *created, UpdatedAt: *updated}, sec})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		q.Item.Role, q.Item.Attempt = q.Role, 0
		out[i] = q
	}
	if len(ds) > 1 {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Targets = map[string]Target{}
		for _, st := range sealed[i] {
			t, err := s.open(st.e, st.sealed)
			if err != nil {
				out[i].Err = err
				break
			}
			out[i].Targets[t.Role] = t
		}
	}
	return out, nil
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

// ClaimHead takes the lease for the first attempt of the key's head when that is what the
// key needs next: the head has had no attempt on its role yet and no lease covers that
// attempt. ok is false otherwise (the key is empty, its head waits for a wake-up, or
// another worker is making the attempt). The account's endpoints with their secrets, by
// role, are read in the same statement: the attempt is signed with what they are at claim
// time, a moment before the send.
//
// One round trip, committed without waiting for the WAL flush: the lease only keeps
// duplicate drives off an attempt while it runs, and a database crash that loses it at
// worst repeats an attempt (any later synchronous commit flushes it too).
func (s *Store) ClaimHead(ctx context.Context, accountID, okey string, lease time.Duration) (Item, map[string]Target, bool, error) {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SET LOCAL synchronous_commit TO OFF`)
	b.Queue(`WITH c AS (
			UPDATE webhook_queue q SET claim_attempt = 1, claim_until = now() + $3::interval
			WHERE q.seq = (SELECT min(h.seq) FROM webhook_queue h WHERE h.account_id = $1 AND h.okey = $2)
			  AND q.attempt = 0
			  AND (q.claim_until IS NULL OR q.claim_until < now() OR q.claim_attempt <> 1)
			RETURNING `+itemCols+`) `+withTargets, accountID, okey, lease)
	b.Queue(`COMMIT`)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var it Item
	var claimed bool
	var targets map[string]Target
	err := func() error {
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if it, targets, claimed, err = s.scanClaimed(rows); err != nil {
			return err
		}
		_, err = br.Exec()
		return err
	}()
	if err != nil {
		return Item{}, nil, false, err
	}
	return it, targets, claimed, br.Close()
}

// withTargets follows a CTE c that claimed a queue row (RETURNING itemCols): it returns
// the row with each endpoint of its account, read in the claim's snapshot. An endpoint's
// Delete drops the queue rows of its role and the endpoint in one transaction, so a claim
// that found its row also finds the endpoint: an attempt never mistakes a Delete that
// commits while it is being claimed for an endpoint that was never there (which would
// dead-letter a delivery the Delete dropped).
const withTargets = `SELECT c.seq, c.account_id, c.okey, c.event_id, c.event_type, c.body, c.max_attempts, c.role, c.attempt, c.due_at,
		       e.id, e.url, e.events, e.role, e.is_active, e.created_at, e.updated_at, e.secret_enc
		FROM c LEFT JOIN webhook_endpoints e ON e.account_id = c.account_id`

// scanClaimed reads the rows of a withTargets statement and closes them: the claimed item
// (ok false when nothing was claimed) and its account's endpoints with their secrets, by
// role.
func (s *Store) scanClaimed(rows pgx.Rows) (it Item, targets map[string]Target, ok bool, err error) {
	defer rows.Close()
	targets = map[string]Target{}
	for rows.Next() {
		var id, url, role *string
		var evs []string
		var active *bool
		var created, updated *time.Time
		var sealed []byte
		if err := rows.Scan(&it.Seq, &it.AccountID, &it.OKey, &it.EventID, &it.EventType, &it.Body, &it.MaxAttempts,
			&it.Role, &it.Attempt, &it.DueAt, &id, &url, &evs, &role, &active, &created, &updated, &sealed); err != nil {
			return Item{}, nil, false, err
		}
		ok = true
		if id == nil {
			continue // the account has no endpoint any more
		}
		t, err := s.open(Endpoint{ID: *id, AccountID: it.AccountID, URL: *url, Events: evs, Role: *role,
			IsActive: *active, CreatedAt: *created, UpdatedAt: *updated}, sealed)
		if err != nil {
			return Item{}, nil, false, err
		}
		targets[t.Role] = t
	}
	if err := rows.Err(); err != nil {
		return Item{}, nil, false, err
	}
	return it, targets, ok, nil
}

// Due is a head of an ordering key whose next attempt is overdue: attempt Attempt+1 on
// Role of EventID.
type Due struct {
	AccountID string
	OKey      string
	EventID   string
	Role      string
	Attempt   int
}

// Overdue lists the heads of ordering keys whose next attempt was due more than grace ago
// and that nobody holds a lease on: deliveries whose driver died (or dropped them) after
// they were queued. At most perAccount heads of one account and limit in all, the longest
// overdue first.
func (s *Store) Overdue(ctx context.Context, grace time.Duration, perAccount, limit int) ([]Due, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT account_id, okey, event_id, role, attempt FROM (
			SELECT q.account_id, q.okey, q.event_id, q.role, q.attempt, q.due_at,
			       row_number() OVER (PARTITION BY q.account_id ORDER BY q.due_at, q.seq) AS n
			FROM webhook_queue q
			WHERE q.due_at < now() - $1::interval
			  AND (q.claim_until IS NULL OR q.claim_until < now())
			  AND NOT EXISTS (SELECT 1 FROM webhook_queue h
			                  WHERE h.account_id = q.account_id AND h.okey = q.okey AND h.seq < q.seq)
		) d WHERE n <= $2 ORDER BY due_at LIMIT $3`, grace, perAccount, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Due, error) {
		var d Due
		err := r.Scan(&d.AccountID, &d.OKey, &d.EventID, &d.Role, &d.Attempt)
		return d, err
	})
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
// once it expires. A claimed attempt comes with the account's endpoints and their secrets,
// by role, read in the same statement (as ClaimHead does).
func (s *Store) Claim(ctx context.Context, eventID, role string, n int, lease time.Duration) (Item, map[string]Target, ClaimResult, error) {
	rows, err := s.pool.Query(ctx, `
		WITH c AS (
			UPDATE webhook_queue q SET claim_attempt = $3, claim_until = now() + $4::interval
			WHERE q.event_id = $1 AND q.role = $2 AND q.attempt = $3 - 1
			  AND (q.claim_until IS NULL OR q.claim_until < now() OR q.claim_attempt <> $3)
			  AND q.seq = (SELECT min(h.seq) FROM webhook_queue h WHERE h.account_id = q.account_id AND h.okey = q.okey)
			RETURNING `+itemCols+`) `+withTargets, eventID, role, n, lease)
	if err != nil {
		return Item{}, nil, 0, err
	}
	it, targets, ok, err := s.scanClaimed(rows)
	switch {
	case err != nil:
		return Item{}, nil, 0, err
	case ok:
		return it, targets, Claimed, nil
	}
	var curRole string
	var attempt, claimAttempt int
	var leased bool
	err = s.pool.QueryRow(ctx, `SELECT role, attempt, claim_attempt, COALESCE(claim_until > now(), false)
		FROM webhook_queue WHERE event_id = $1`, eventID).Scan(&curRole, &attempt, &claimAttempt, &leased)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Item{}, nil, Stale, nil
	case err != nil:
		return Item{}, nil, 0, err
	case curRole != role || attempt >= n:
		return Item{}, nil, Stale, nil
	case attempt < n-1 && leased && claimAttempt == n-1:
		// The worker making attempt n-1 produced this wake-up and has not committed yet.
		return Item{}, nil, Behind, nil
	case attempt < n-1:
		// Its writer died before committing: the record that made it do attempt n-1 is
		// redelivered, redoes that attempt and produces a new wake-up. Waiting for this
		// one could block its partition behind a delivery that can never catch up.
		return Item{}, nil, Stale, nil
	case leased && claimAttempt == n:
		return Item{}, nil, Busy, nil
	}
	return Item{}, nil, Stale, nil // not the head of its key: the head's completion starts it
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
// queue, which makes the next delivery of its key the head. more reports whether the key
// had deliveries behind this one (true when unsure). One round trip (the statements are
// pipelined).
//
// A delivered one is committed without waiting for the WAL flush (synchronous_commit off,
// for this transaction only), as the history of a first attempt that succeeded always
// was: a database crash that loses the commit brings the delivery back and it is sent
// again (at least once; the first sighting of each event id stays in order, since any
// later synchronous commit flushes this one too). A dead one is committed synchronously:
// its dead letter is written already.
func (s *Store) Finish(ctx context.Context, a Attempt) (more bool, err error) {
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	if a.Succeeded {
		b.Queue(`SET LOCAL synchronous_commit TO OFF`)
	}
	b.Queue(`DELETE FROM webhook_queue q WHERE q.event_id = $1
		RETURNING EXISTS (SELECT 1 FROM webhook_queue h WHERE h.account_id = q.account_id AND h.okey = q.okey AND h.seq > q.seq)`, a.EventID)
	if a.EndpointID != "" {
		queueAttempt(b, a)
	}
	b.Queue(`COMMIT`)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	exec := func(n int) error {
		for range n {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := exec(1 + boolInt(a.Succeeded)); err != nil { // BEGIN, SET
		return true, err
	}
	if err := br.QueryRow().Scan(&more); err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			return true, err
		}
		more = true // gone already (its endpoint was deleted): the head tells
	}
	if err := exec(boolInt(a.EndpointID != "") + 1); err != nil { // INSERT, COMMIT
		return true, err
	}
	return more, br.Close()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
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
//
// It skips rows another transaction holds instead of waiting for them: an endpoint's
// Delete removes the same history by cascade, locking the rows in another order, and two
// deletes that wait for each other's rows deadlock. A skipped row goes with its endpoint,
// or with the next prune.
func (s *Store) PruneHistory(ctx context.Context, olderThan time.Duration) (int64, error) {
	const chunk = 5000
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE id IN (
			SELECT id FROM webhook_deliveries WHERE attempted_at < now() - $1::interval
			LIMIT $2 FOR UPDATE SKIP LOCKED)`, olderThan, chunk)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < chunk {
			return total, nil
		}
	}
}

// QueueStats is what an operator watches of the delivery queue.
type QueueStats struct {
	Depth int64 // deliveries queued (heads and those waiting behind them)
	// OldestDue is how long the longest-waiting delivery has been due (0 when none is
	// due): a head waiting for a retry is not due until its next attempt.
	OldestDue time.Duration
}

// Stats reads the queue's depth and oldest due age in one statement (the due_at index
// answers the minimum; the count reads the queue, which is small unless deliveries are
// failing).
func (s *Store) Stats(ctx context.Context) (QueueStats, error) {
	var st QueueStats
	var age float64
	err := s.pool.QueryRow(ctx, `SELECT count(*),
			COALESCE(GREATEST(EXTRACT(EPOCH FROM now() - min(due_at)), 0), 0)::float8
		FROM webhook_queue`).Scan(&st.Depth, &age)
	st.OldestDue = time.Duration(age * float64(time.Second))
	return st, err
}

// ReplayMaxAttempts is how many attempts a replayed delivery gets on its endpoint.
const ReplayMaxAttempts = 10

// ErrNoEndpoint is returned by Replay when no active endpoint of the account takes the
// event: nothing is queued and the event stays replayable.
var ErrNoEndpoint = errors.New("webhooks: no active endpoint of the account takes the event")

// Replay queues a dead-lettered delivery again (it.AccountID, OKey, EventID, EventType and
// Body from the dead letter), behind the other deliveries of its key, on the role a new
// event would start on, with a fresh ReplayMaxAttempts attempts; a deliverer's sweep picks
// it up within seconds. Each event is replayed at most once: the replay is remembered in
// webhook_replays, with the actor and reason, and audited, in the same transaction.
// replayed is false when the event was replayed before (nothing changes).
func (s *Store) Replay(ctx context.Context, it Item, actor, reason string) (replayed bool, err error) {
	err = s.InTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO webhook_replays (event_id, account_id, actor, reason) VALUES ($1, $2, $3, $4)
			ON CONFLICT (event_id) DO NOTHING`, it.EventID, it.AccountID, actor, reason)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		var role string
		err = tx.QueryRow(ctx, `SELECT role FROM webhook_endpoints
			WHERE account_id = $1 AND is_active AND (events IS NULL OR $2 = ANY (events))
			ORDER BY role = 'backup' LIMIT 1`, it.AccountID, it.EventType).Scan(&role)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNoEndpoint
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_queue (account_id, okey, event_id, event_type, body, max_attempts, role)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (event_id) DO NOTHING`,
			it.AccountID, it.OKey, it.EventID, it.EventType, it.Body, ReplayMaxAttempts, role); err != nil {
			return err
		}
		replayed = true
		return accounts.WriteAudit(ctx, tx, it.AccountID, actor, "webhook.replay", map[string]any{"event_id": it.EventID, "reason": reason, "role": role})
	})
	return replayed, err
}
