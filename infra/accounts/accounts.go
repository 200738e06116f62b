// Package accounts is the store of accounts, their API keys and their audit trail in
// Postgres. It holds no transport: the edge maps its errors (ErrNotFound, and catalogue
// errors such as 3017 returned as *apierr.Error) to responses.
//
// Methods that may need to join a caller's transaction (idempotent creates) take a Querier,
// which both *pgxpool.Pool and pgx.Tx satisfy.
package accounts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/tron"
	"rental/schemas/events"
	"rental/schemas/network"
)

// Account statuses (the spec's enum).
const (
	StatusUnfunded  = "unfunded"
	StatusActive    = "active"
	StatusSuspended = "suspended"
	StatusClosed    = "closed"
)

// ErrNotFound is returned for an unknown account or key.
var ErrNotFound = errors.New("accounts: not found")

// Querier runs SQL: a pool or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Account is an account row.
type Account struct {
	ID        string
	Network   network.Network
	Owner     tron.Address
	Label     *string // display name; nil shows the shortened owner address
	Email     *string
	Status    string
	CreatedAt time.Time
}

// Store reads and writes accounts and keys.
type Store struct {
	pool   *pgxpool.Pool
	sealer *Sealer
	maxKey int
}

// Options configure a Store.
type Options struct {
	// MasterKey encrypts API key secrets at rest: 32 bytes (AES-256). Required for key
	// operations; account operations work without it.
	MasterKey []byte
	// PreviousMasterKey (API_KEY_MASTER_KEY_OLD, during a rotation) opens secrets not yet
	// re-encrypted under MasterKey.
	PreviousMasterKey []byte
	// MaxActiveKeys bounds the keys of an account that are neither revoked nor expired
	// (default 10); CreateKey refuses more with 3017.
	MaxActiveKeys int
}

// New returns a store on pool.
func New(pool *pgxpool.Pool, o Options) (*Store, error) {
	s := &Store{pool: pool, maxKey: o.MaxActiveKeys}
	if s.maxKey <= 0 {
		s.maxKey = 10
	}
	if o.MasterKey != nil {
		sealer, err := NewSealer(o.MasterKey, o.PreviousMasterKey)
		if err != nil {
			return nil, err
		}
		s.sealer = sealer
	}
	return s, nil
}

// Pool is the store's pool, for callers that open a transaction spanning several stores.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

const accountCols = `id, network, owner_address, label, email, status, created_at`

func scanAccount(row pgx.Row) (Account, error) {
	var a Account
	var net, owner string
	if err := row.Scan(&a.ID, &net, &owner, &a.Label, &a.Email, &a.Status, &a.CreatedAt); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Account{}, ErrNotFound
		}
		return Account{}, err
	}
	a.Network = network.Network(net)
	o, err := tron.ParseAddress(owner)
	if err != nil {
		return Account{}, fmt.Errorf("accounts: stored owner %q: %w", owner, err)
	}
	a.Owner = o
	return a, nil
}

// CreateAccount inserts a new unfunded account owned by owner. It fails with a unique
// violation when owner already owns an account on net; use CreateOrGetByOwner for signup.
func (s *Store) CreateAccount(ctx context.Context, net network.Network, owner tron.Address, email, label *string) (Account, error) {
	return scanAccount(s.pool.QueryRow(ctx, `
		INSERT INTO accounts (id, network, owner_address, email, label)
		VALUES ($1, $2, $3, $4, $5)
		RETURNING `+accountCols, events.NewID("acc"), string(net), owner.String(), email, label))
}

// CreateOrGetByOwner returns the account owner owns on net, creating it (unfunded) when
// there is none; created tells which. Concurrent calls for one owner create exactly one
// account: the insert does nothing on the (network, owner_address) constraint and the
// existing row is read instead. email and label apply only to a new account.
func (s *Store) CreateOrGetByOwner(ctx context.Context, net network.Network, owner tron.Address, email, label *string) (Account, bool, error) {
	a, err := scanAccount(s.pool.QueryRow(ctx, `
		INSERT INTO accounts (id, network, owner_address, email, label)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT ON CONSTRAINT accounts_owner_unique DO NOTHING
		RETURNING `+accountCols, events.NewID("acc"), string(net), owner.String(), email, label))
	if err == nil {
		return a, true, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return Account{}, false, err
	}
	a, err = s.GetAccountByOwner(ctx, net, owner)
	return a, false, err
}

// GetAccount reads an account; ErrNotFound when there is none.
func (s *Store) GetAccount(ctx context.Context, id string) (Account, error) {
	return scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountCols+` FROM accounts WHERE id = $1`, id))
}

// GetAccountByOwner reads the account owner owns on net; ErrNotFound when there is none.
func (s *Store) GetAccountByOwner(ctx context.Context, net network.Network, owner tron.Address) (Account, error) {
	return scanAccount(s.pool.QueryRow(ctx,
		`SELECT `+accountCols+` FROM accounts WHERE network = $1 AND owner_address = $2`, string(net), owner.String()))
}

// UpdateLabel sets the display name; nil clears it. It returns the updated account.
func (s *Store) UpdateLabel(ctx context.Context, id string, label *string) (Account, error) {
	return scanAccount(s.pool.QueryRow(ctx,
		`UPDATE accounts SET label = $2, updated_at = now() WHERE id = $1 RETURNING `+accountCols, id, label))
}

// SetStatus changes the account status (support tooling, the ledger on first deposit).
func (s *Store) SetStatus(ctx context.Context, id, status string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE accounts SET status = $2, updated_at = now() WHERE id = $1`, id, status)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// WriteAudit appends an audit row. actor names who acted: "key:ak_...", "session:<wallet>",
// "bootstrap:<wallet>", "system". details must marshal to a JSON object.
func WriteAudit(ctx context.Context, q Querier, accountID, actor, action string, details map[string]any) error {
	if details == nil {
		details = map[string]any{}
	}
	_, err := q.Exec(ctx, `INSERT INTO audit_log (account_id, actor, action, details) VALUES ($1, $2, $3, $4)`,
		accountID, actor, action, details)
	return err
}

// WriteAudit appends an audit row outside any transaction; see the function WriteAudit.
func (s *Store) WriteAudit(ctx context.Context, accountID, actor, action string, details map[string]any) error {
	return WriteAudit(ctx, s.pool, accountID, actor, action, details)
}

// AuditEntry is one audit row.
type AuditEntry struct {
	Actor, Action string
	Details       map[string]any
	At            time.Time
}

// Audit lists the newest limit audit rows of an account, newest first.
func (s *Store) Audit(ctx context.Context, accountID string, limit int) ([]AuditEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT actor, action, details, at FROM audit_log
		WHERE account_id = $1 ORDER BY at DESC, id DESC LIMIT $2`, accountID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := r.Scan(&e.Actor, &e.Action, &e.Details, &e.At)
		return e, err
	})
}
