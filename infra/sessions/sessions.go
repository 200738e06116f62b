// Package sessions holds dashboard sessions and their sign-in history.
//
// A session is created by a signed login challenge (the edge checks the signature) and is
// carried by a cookie whose value is a 256-bit random secret. Only the SHA-256 of that secret
// is stored, so a database leak yields no usable cookie. The CSRF token is not stored at
// all: it is an HMAC of a fixed label keyed with the cookie secret, so the server can
// recompute and compare it on every request while only the cookie holder can know it.
//
// Lifetime: a session ends at the earlier of its idle deadline, which slides forward by
// Idle on every use (and on refresh), and its absolute deadline, fixed at sign-in. Revoked
// sessions stay as rows (revoked_at) for audit.
package sessions

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/tron"
	"rental/schemas/events"
)

// ErrNoSession is the answer to a missing, unknown, expired or revoked session (1013).
var ErrNoSession = errors.New("sessions: no live session")

// Defaults of the lifetime. The spec leaves the value open; docs/signup.md records it.
const (
	DefaultIdle     = 2 * time.Hour
	DefaultAbsolute = 24 * time.Hour
	// slideEvery bounds write load: a use within this time of the last slide does not
	// write again. The idle deadline is therefore exact to within a minute.
	slideEvery = time.Minute
	// HistoryLimit is the spec's sign-in history size.
	HistoryLimit = 10
)

// Roles of dashboard members. The account's owner address holds RoleOwner.
const (
	RoleOwner  = "owner"
	RoleEditor = "editor"
	RoleViewer = "viewer"
)

// Options configure a Store.
type Options struct {
	Idle     time.Duration    // idle lifetime, slides with use (default 2 h)
	Absolute time.Duration    // absolute lifetime from sign-in (default 24 h)
	Now      func() time.Time // default time.Now
}

// Store keeps sessions in Postgres.
type Store struct {
	pool *pgxpool.Pool
	o    Options
}

// NewStore returns a Store.
func NewStore(pool *pgxpool.Pool, o Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("sessions: pool is required")
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.Absolute <= 0 {
		o.Absolute = DefaultAbsolute
	}
	if o.Idle > o.Absolute {
		o.Idle = o.Absolute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{pool: pool, o: o}, nil
}

// Absolute is the configured absolute lifetime (the cookie's Max-Age at creation).
func (s *Store) Absolute() time.Duration { return s.o.Absolute }

func (s *Store) now() time.Time { return s.o.Now().UTC().Truncate(time.Microsecond) }

// Session is a live session. Secret is the cookie value and is set only by Create and
// Lookup (it is never stored); never log it or render it in a body.
type Session struct {
	ID                string // ses_..., a public handle
	Secret            string
	AccountID         string
	Address           tron.Address
	Role              string
	CreatedAt         time.Time
	IdleExpiresAt     time.Time
	AbsoluteExpiresAt time.Time
}

// ExpiresAt is when the session ends if not used again: the earlier deadline.
func (s Session) ExpiresAt() time.Time {
	if s.IdleExpiresAt.Before(s.AbsoluteExpiresAt) {
		return s.IdleExpiresAt
	}
	return s.AbsoluteExpiresAt
}

// CSRFToken is the session's CSRF token: base64url(HMAC-SHA256(key = cookie secret,
// "rental csrf v1")). Deterministic per session, unknowable without the cookie.
func (s Session) CSRFToken() string { return csrfFor(s.Secret) }

// CSRFFor is the CSRF token of the session whose cookie value is secret.
func CSRFFor(secret string) string { return csrfFor(secret) }

func csrfFor(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("rental csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// CheckCSRF compares a presented token with the session's in constant time.
func (s Session) CheckCSRF(presented string) bool {
	want := s.CSRFToken()
	return subtle.ConstantTimeCompare([]byte(presented), []byte(want)) == 1
}

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// Create starts a session for address on accountID with role and records the sign-in
// (ip) in the same transaction.
func (s *Store) Create(ctx context.Context, accountID string, address tron.Address, role, ip string) (Session, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Session{}, err
	}
	now := s.now()
	ss := Session{
		ID: events.NewID("ses"), Secret: base64.RawURLEncoding.EncodeToString(b[:]),
		AccountID: accountID, Address: address, Role: role, CreatedAt: now,
		IdleExpiresAt: now.Add(s.o.Idle), AbsoluteExpiresAt: now.Add(s.o.Absolute),
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO dashboard_sessions
			(id, secret_hash, account_id, address, role, created_at, last_seen_at, idle_expires_at, absolute_expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8)`,
			ss.ID, hashSecret(ss.Secret), accountID, address.String(), role, now, ss.IdleExpiresAt, ss.AbsoluteExpiresAt); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO session_sign_ins (account_id, address, session_id, ip, signed_in_at)
			VALUES ($1, $2, $3, $4, $5)`, accountID, address.String(), ss.ID, ip, now)
		return err
	})
	if err != nil {
		return Session{}, fmt.Errorf("sessions: create: %w", err)
	}
	return ss, nil
}

// Get is Lookup without sliding the idle deadline (used to classify a refused request).
func (s *Store) Get(ctx context.Context, secret string) (Session, error) {
	if secret == "" || len(secret) > 128 {
		return Session{}, ErrNoSession
	}
	now := s.now()
	var ss Session
	var addr string
	err := s.pool.QueryRow(ctx, `SELECT id, account_id, address, role, created_at, idle_expires_at, absolute_expires_at
		FROM dashboard_sessions
		WHERE secret_hash = $1 AND revoked_at IS NULL AND idle_expires_at > $2 AND absolute_expires_at > $2`,
		hashSecret(secret), now).
		Scan(&ss.ID, &ss.AccountID, &addr, &ss.Role, &ss.CreatedAt, &ss.IdleExpiresAt, &ss.AbsoluteExpiresAt)
	return finish(ss, addr, secret, err)
}

func finish(ss Session, addr, secret string, err error) (Session, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return Session{}, ErrNoSession
	}
	if err != nil {
		return Session{}, fmt.Errorf("sessions: lookup: %w", err)
	}
	if ss.Address, err = tron.ParseAddress(addr); err != nil {
		return Session{}, fmt.Errorf("sessions: stored address: %w", err)
	}
	ss.Secret = secret
	ss.CreatedAt, ss.IdleExpiresAt, ss.AbsoluteExpiresAt = ss.CreatedAt.UTC(), ss.IdleExpiresAt.UTC(), ss.AbsoluteExpiresAt.UTC()
	return ss, nil
}

// Lookup returns the live session of a cookie value and slides its idle deadline forward.
// Anything else is ErrNoSession. The lookup is by hash, so no stored secret is compared
// byte by byte.
func (s *Store) Lookup(ctx context.Context, secret string) (Session, error) {
	return s.touch(ctx, secret, false)
}

// Refresh is Lookup that always extends the idle deadline to now + Idle (capped by the
// absolute deadline).
func (s *Store) Refresh(ctx context.Context, secret string) (Session, error) {
	return s.touch(ctx, secret, true)
}

func (s *Store) touch(ctx context.Context, secret string, force bool) (Session, error) {
	if secret == "" || len(secret) > 128 {
		return Session{}, ErrNoSession
	}
	now := s.now()
	// One statement: only a live session is returned and slid; the slide is skipped when
	// the last one is recent (unless forced) so reads do not write on every request.
	var ss Session
	var addr string
	err := s.pool.QueryRow(ctx, `
		WITH live AS (
			SELECT id FROM dashboard_sessions
			WHERE secret_hash = $1 AND revoked_at IS NULL AND idle_expires_at > $2 AND absolute_expires_at > $2
		), slid AS (
			UPDATE dashboard_sessions d
			SET last_seen_at = $2, idle_expires_at = LEAST($2 + $3::bigint * interval '1 microsecond', d.absolute_expires_at)
			FROM live WHERE d.id = live.id AND ($4 OR d.last_seen_at < $2 - $5::bigint * interval '1 microsecond')
			RETURNING d.id, d.idle_expires_at
		)
		SELECT d.id, d.account_id, d.address, d.role, d.created_at,
		       COALESCE(slid.idle_expires_at, d.idle_expires_at), d.absolute_expires_at
		FROM dashboard_sessions d JOIN live ON live.id = d.id LEFT JOIN slid ON slid.id = d.id`,
		hashSecret(secret), now, s.o.Idle.Microseconds(), force, slideEvery.Microseconds()).
		Scan(&ss.ID, &ss.AccountID, &addr, &ss.Role, &ss.CreatedAt, &ss.IdleExpiresAt, &ss.AbsoluteExpiresAt)
	return finish(ss, addr, secret, err)
}

// Revoke ends one session. Revoking an already ended session is not an error.
func (s *Store) Revoke(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE dashboard_sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL`, id, s.now())
	if err != nil {
		return fmt.Errorf("sessions: revoke: %w", err)
	}
	return nil
}

// RevokeAll ends every live session of address on accountID (other members' sessions are
// left alone) and, in the same transaction, calls then with the number ended, so the caller's
// audit row commits together with the revocation or not at all.
func (s *Store) RevokeAll(ctx context.Context, accountID string, address tron.Address,
	then func(ctx context.Context, tx pgx.Tx, revoked int64) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE dashboard_sessions SET revoked_at = $3
			WHERE account_id = $1 AND address = $2 AND revoked_at IS NULL`, accountID, address.String(), s.now())
		if err != nil {
			return err
		}
		if then != nil {
			return then(ctx, tx, tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sessions: revoke all: %w", err)
	}
	return nil
}

// SignIn is one row of the sign-in history.
type SignIn struct {
	SignedInAt time.Time
	IP         string
	Address    tron.Address
}

// History returns the last HistoryLimit sign-ins of address on accountID, newest first.
func (s *Store) History(ctx context.Context, accountID string, address tron.Address) ([]SignIn, error) {
	rows, err := s.pool.Query(ctx, `SELECT signed_in_at, ip, address FROM session_sign_ins
		WHERE account_id = $1 AND address = $2 ORDER BY signed_in_at DESC, id DESC LIMIT $3`,
		accountID, address.String(), HistoryLimit)
	if err != nil {
		return nil, fmt.Errorf("sessions: history: %w", err)
	}
	out := []SignIn{}
	for rows.Next() {
		var si SignIn
		var addr string
		if err := rows.Scan(&si.SignedInAt, &si.IP, &addr); err != nil {
			return nil, err
		}
		if si.Address, err = tron.ParseAddress(addr); err != nil {
			return nil, err
		}
		si.SignedInAt = si.SignedInAt.UTC()
		out = append(out, si)
	}
	return out, rows.Err()
}
