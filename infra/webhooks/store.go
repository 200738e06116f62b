package webhooks

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/accounts"
	"rental/schemas/apierr"
	"rental/schemas/events"
)

// Roles of an endpoint. An account has at most one of each.
const (
	RolePrimary = "primary"
	RoleBackup  = "backup"
)

// MaxEndpoints is the spec's limit per account.
const MaxEndpoints = 2

// ErrNotFound is an unknown endpoint id, or one of another account (not distinguished).
var ErrNotFound = errors.New("webhooks: endpoint not found")

// Querier runs SQL: a pool or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Endpoint is an endpoint record without its secret.
type Endpoint struct {
	ID        string
	AccountID string
	URL       string
	Events    []string // nil: every event type, including types added later
	Role      string
	IsActive  bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Wants reports whether the endpoint subscribes to eventType.
func (e Endpoint) Wants(eventType string) bool {
	return e.Events == nil || slices.Contains(e.Events, eventType)
}

// Target is an endpoint with its secret in plaintext, for signing a delivery.
type Target struct {
	Endpoint
	Secret string
}

// Store keeps endpoints, the delivery queue and the delivery history in Postgres.
type Store struct {
	pool   *pgxpool.Pool
	sealer *accounts.Sealer
}

// NewStore encrypts secrets with masterKey (32 bytes, the API key master key: one key to
// guard and rotate for every secret the service must be able to read back).
func NewStore(pool *pgxpool.Pool, masterKey []byte, previous ...[]byte) (*Store, error) {
	sealer, err := accounts.NewSealer(masterKey, previous...)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return &Store{pool: pool, sealer: sealer}, nil
}

// Pool is the store's pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// InTx runs fn in a transaction committed when fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// newSecret is whsec_ and 43 base64url characters (256 random bits).
func newSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "whsec_" + base64.RawURLEncoding.EncodeToString(b[:])
}

const endpointCols = `id, account_id, url, events, role, is_active, created_at, updated_at`

func scanEndpoint(row pgx.Row, extra ...any) (Endpoint, error) {
	var e Endpoint
	err := row.Scan(append([]any{&e.ID, &e.AccountID, &e.URL, &e.Events, &e.Role, &e.IsActive, &e.CreatedAt, &e.UpdatedAt}, extra...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, ErrNotFound
	}
	return e, err
}

// NewEndpoint is a registration. Role "" takes primary when the account has none, else
// backup. Events nil subscribes to everything, types added later included.
type NewEndpoint struct {
	URL    string
	Events []string
	Role   string
}

// lockAccount serialises the endpoint changes of one account (limit and role checks).
func lockAccount(ctx context.Context, tx pgx.Tx, accountID string) error {
	var id string
	err := tx.QueryRow(ctx, `SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, accountID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("webhooks: account %s does not exist", accountID)
	}
	return err
}

// Create registers an endpoint inside tx and returns it with its secret, which is never
// available again. 3013 when the account has two endpoints, 3014 when the role is held.
func (s *Store) Create(ctx context.Context, tx pgx.Tx, accountID string, n NewEndpoint) (Target, error) {
	if err := lockAccount(ctx, tx, accountID); err != nil {
		return Target{}, err
	}
	rows, err := tx.Query(ctx, `SELECT role FROM webhook_endpoints WHERE account_id = $1`, accountID)
	if err != nil {
		return Target{}, err
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return Target{}, err
	}
	if len(held) >= MaxEndpoints {
		return Target{}, apierr.WebhookLimitReached.New("two endpoints are registered already (one primary, one backup); delete one first")
	}
	role := n.Role
	if role == "" {
		role = RolePrimary
		if slices.Contains(held, RolePrimary) {
			role = RoleBackup
		}
	}
	if slices.Contains(held, role) {
		return Target{}, apierr.WebhookRoleTaken.New("another endpoint holds role " + role).WithField("role")
	}
	id := events.NewID("wh")
	secret := newSecret()
	e, err := scanEndpoint(tx.QueryRow(ctx, `
		INSERT INTO webhook_endpoints (id, account_id, url, events, role, secret_enc)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+endpointCols,
		id, accountID, n.URL, n.Events, role, s.sealer.Seal(id, []byte(secret))))
	if err != nil {
		return Target{}, err
	}
	return Target{Endpoint: e, Secret: secret}, nil
}

// List returns the account's endpoints, primary first.
func (s *Store) List(ctx context.Context, accountID string) ([]Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints
		WHERE account_id = $1 ORDER BY role = 'backup', created_at`, accountID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Endpoint, error) { return scanEndpoint(r) })
}

// Get reads one endpoint of the account; ErrNotFound otherwise.
func (s *Store) Get(ctx context.Context, q Querier, accountID, id string) (Endpoint, error) {
	return scanEndpoint(q.QueryRow(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints
		WHERE account_id = $1 AND id = $2`, accountID, id))
}

// GetTarget reads one endpoint of the account with its secret.
func (s *Store) GetTarget(ctx context.Context, accountID, id string) (Target, error) {
	var sealed []byte
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointCols+`, secret_enc FROM webhook_endpoints
		WHERE account_id = $1 AND id = $2`, accountID, id), &sealed)
	if err != nil {
		return Target{}, err
	}
	return s.open(e, sealed)
}

func (s *Store) open(e Endpoint, sealed []byte) (Target, error) {
	secret, err := s.sealer.Open(e.ID, sealed)
	if err != nil {
		return Target{}, fmt.Errorf("webhooks: secret of %s: %w", e.ID, err)
	}
	return Target{Endpoint: e, Secret: string(secret)}, nil
}

// Update changes an endpoint; nil fields are left alone. SetEvents with Events nil
// subscribes to everything.
type Update struct {
	URL       *string
	SetEvents bool
	Events    []string
	IsActive  *bool
	Role      *string
}

// Empty reports whether u changes nothing.
func (u Update) Empty() bool {
	return u.URL == nil && !u.SetEvents && u.IsActive == nil && u.Role == nil
}

// Update applies u inside tx. Moving an endpoint to the role the other endpoint holds
// swaps the two roles in the same transaction: readers see both before or both after.
func (s *Store) Update(ctx context.Context, tx pgx.Tx, accountID, id string, u Update) (Endpoint, error) {
	if err := lockAccount(ctx, tx, accountID); err != nil {
		return Endpoint{}, err
	}
	cur, err := s.Get(ctx, tx, accountID, id)
	if err != nil {
		return Endpoint{}, err
	}
	if u.Role != nil && *u.Role != cur.Role {
		if _, err := tx.Exec(ctx, `SET CONSTRAINTS webhook_endpoints_role_unique DEFERRED`); err != nil {
			return Endpoint{}, err
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET role = $3, updated_at = now()
			WHERE account_id = $1 AND role = $2`, accountID, *u.Role, cur.Role); err != nil {
			return Endpoint{}, err
		}
	}
	url, evs, active, role := cur.URL, cur.Events, cur.IsActive, cur.Role
	if u.URL != nil {
		url = *u.URL
	}
	if u.SetEvents {
		evs = u.Events
	}
	if u.IsActive != nil {
		active = *u.IsActive
	}
	if u.Role != nil {
		role = *u.Role
	}
	return scanEndpoint(tx.QueryRow(ctx, `UPDATE webhook_endpoints
		SET url = $3, events = $4, is_active = $5, role = $6, updated_at = now()
		WHERE account_id = $1 AND id = $2 RETURNING `+endpointCols, accountID, id, url, evs, active, role))
}

// RotateSecret gives the endpoint a new secret inside tx; the next delivery is signed with
// it. The new secret is returned once.
//
// It takes the account lock first, as every other change of an endpoint does: the request's
// transaction goes on to write an audit row, whose foreign key locks the account, and
// holding the endpoint row while waiting for that lock deadlocked with a Delete (which
// holds the account and waits for the endpoint).
func (s *Store) RotateSecret(ctx context.Context, tx pgx.Tx, accountID, id string) (Target, error) {
	if err := lockAccount(ctx, tx, accountID); err != nil {
		return Target{}, err
	}
	secret := newSecret()
	e, err := scanEndpoint(tx.QueryRow(ctx, `UPDATE webhook_endpoints SET secret_enc = $3, updated_at = now()
		WHERE account_id = $1 AND id = $2 RETURNING `+endpointCols, accountID, id, s.sealer.Seal(id, []byte(secret))))
	if err != nil {
		return Target{}, err
	}
	return Target{Endpoint: e, Secret: secret}, nil
}

// Delete removes the endpoint for good, with its delivery history and every delivery
// still queued for its role (the spec: undelivered events for it are dropped).
//
// Lock order: the account row, then the queue rows, then the endpoint row. The deliverer
// records an attempt by writing its queue row first and then a history row, whose foreign
// key check takes a KEY SHARE lock on the endpoint row (Retry, Failover, Finish); a Delete
// that locked the endpoint before the queue rows deadlocked with it. Taken in this order,
// a Delete waits for such a transaction to commit and then deletes what it left: a history
// row goes with the endpoint, a delivery that failed over to the other role stays there.
// The deliverer holds one queue row at a time, so the order in which this statement locks
// the role's rows does not matter.
//
// The role is read without locking the endpoint: roles change only under the account lock.
func (s *Store) Delete(ctx context.Context, accountID, id string) error {
	return s.InTx(ctx, func(tx pgx.Tx) error {
		if err := lockAccount(ctx, tx, accountID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM webhook_queue WHERE account_id = $1
			AND role = (SELECT role FROM webhook_endpoints WHERE account_id = $1 AND id = $2)`, accountID, id); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM webhook_endpoints WHERE account_id = $1 AND id = $2`, accountID, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return nil
	})
}

// Delivery is one attempt of the history.
type Delivery struct {
	ID            string
	EndpointID    string
	EventID       string
	EventType     string
	Role          string
	Attempt       int
	Status        string // succeeded, failed
	HTTPStatus    *int
	Error         *string
	LatencyMS     int
	Next          string // done, retry, failover, dead
	NextAttemptAt *time.Time
	AttemptedAt   time.Time
}

// Deliveries lists an endpoint's history newest first, limit rows after cursor (the id of
// the last row of the previous page; "" for the first page). more tells whether there are
// further rows.
func (s *Store) Deliveries(ctx context.Context, accountID, endpointID string, limit int, cursor string) ([]Delivery, bool, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT d.id, d.endpoint_id, d.event_id, d.event_type, d.role, d.attempt, d.status, d.http_status,
		       d.error, d.latency_ms, d.next, d.next_attempt_at, d.attempted_at
		FROM webhook_deliveries d
		WHERE d.account_id = $1 AND d.endpoint_id = $2
		  AND ($3 = '' OR (d.attempted_at, d.id) < (SELECT attempted_at, id FROM webhook_deliveries
		                                             WHERE id = $3 AND endpoint_id = $2))
		ORDER BY d.attempted_at DESC, d.id DESC
		LIMIT $4`, accountID, endpointID, cursor, limit+1)
	if err != nil {
		return nil, false, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		err := r.Scan(&d.ID, &d.EndpointID, &d.EventID, &d.EventType, &d.Role, &d.Attempt, &d.Status, &d.HTTPStatus,
			&d.Error, &d.LatencyMS, &d.Next, &d.NextAttemptAt, &d.AttemptedAt)
		return d, err
	})
	if err != nil {
		return nil, false, err
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// Rekey re-encrypts every endpoint secret from one API key master key to the next inside
// tx (they are sealed with the same master key as API key secrets; see accounts.Rekey for
// the contract) and returns how many it re-encrypted per account.
func Rekey(ctx context.Context, tx pgx.Tx, from, to *accounts.Sealer) (map[string]int, error) {
	rows, err := tx.Query(ctx, `SELECT id, account_id, secret_enc FROM webhook_endpoints ORDER BY id FOR UPDATE`)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, accounts.ScanSealed)
	if err != nil {
		return nil, err
	}
	done := map[string]int{}
	for _, x := range all {
		enc, changed, err := accounts.Reseal(from, to, x.ID, x.Enc)
		if err != nil {
			return nil, fmt.Errorf("webhook endpoint %s: %w", x.ID, err)
		}
		if !changed {
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET secret_enc = $2 WHERE id = $1`, x.ID, enc); err != nil {
			return nil, err
		}
		done[x.AccountID]++
	}
	return done, nil
}
