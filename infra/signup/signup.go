// Package signup implements the address challenge of rental-api-v1: a caller proves control
// of a TRON address by signing a service-issued, single-use, domain-bound message with its
// wallet (TronWeb signMessageV2), and receives a short-lived bootstrap token (abt_...).
//
// Challenges and tokens live in Postgres (migration 00005). The nonce is consumed by one
// conditional UPDATE, so of any number of concurrent redemptions exactly one succeeds.
// Bootstrap tokens are bearer secrets: only their SHA-256 is stored, the secret is handed out
// once and never logged.
package signup

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/tron"
	"rental/schemas/network"
)

// ErrChallengeInvalid is the one answer to every failed redemption: unknown, expired, already
// used, issued for another address or purpose, or a signature that does not recover the
// address. Callers must not tell these apart (the spec's single error 1010).
var ErrChallengeInvalid = errors.New("signup: challenge invalid")

// ErrTokenInvalid is the answer to an unknown, malformed or expired bootstrap token (1011).
var ErrTokenInvalid = errors.New("signup: bootstrap token invalid or expired")

// TokenPrefix starts every bootstrap token.
const TokenPrefix = "abt_"

// Defaults of the spec's Limits part.
const (
	DefaultChallengeTTL = 10 * time.Minute
	DefaultTokenTTL     = 15 * time.Minute
)

// Options configure a Service.
type Options struct {
	Brand   string          // BRAND, shown in the message; required
	Host    string          // PUBLIC_HOST, bound into the message; required
	Network network.Network // required

	ChallengeTTL time.Duration // default 10 minutes (the spec's challenge lifetime)
	TokenTTL     time.Duration // default 15 minutes (the spec's bootstrap token lifetime)

	// Now is the clock (default time.Now). Times are truncated to milliseconds, the
	// precision of the spec's timestamps, so the message and the stored row agree.
	Now func() time.Time
	// NewNonce makes a nonce: lowercase hex, 32 to 128 characters (default 16 random bytes,
	// 128 bits). Tests inject a fixed one to reproduce committed signature vectors.
	NewNonce func() (string, error)
}

// Service issues and redeems challenges and bootstrap tokens.
type Service struct {
	pool *pgxpool.Pool
	o    Options
}

// New checks the options and returns a Service.
func New(pool *pgxpool.Pool, o Options) (*Service, error) {
	if pool == nil {
		return nil, errors.New("signup: pool is required")
	}
	if o.Brand == "" || o.Host == "" {
		return nil, errors.New("signup: Brand and Host are required")
	}
	if strings.ContainsAny(o.Brand+o.Host, "\r\n") {
		return nil, errors.New("signup: Brand and Host must be one line each")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, fmt.Errorf("signup: %w", err)
	}
	if o.ChallengeTTL <= 0 {
		o.ChallengeTTL = DefaultChallengeTTL
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewNonce == nil {
		o.NewNonce = randomNonce
	}
	return &Service{pool: pool, o: o}, nil
}

func (s *Service) now() time.Time { return s.o.Now().UTC().Truncate(time.Millisecond) }

// Network is the environment the service binds into messages.
func (s *Service) Network() network.Network { return s.o.Network }

// Brand is the brand shown in messages.
func (s *Service) Brand() string { return s.o.Brand }

// Challenge is an issued challenge.
type Challenge struct {
	Nonce     string
	Address   tron.Address
	Purpose   Purpose
	Message   string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

var nonceRE = regexp.MustCompile(`^[0-9a-f]{32,128}$`)

func randomNonce() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Issue makes a challenge for addr. It does not look at accounts at all, so its answer is
// the same whether or not the address owns one (no existence oracle). Expired challenges of
// the same address are deleted on the way, which bounds the table per address.
func (s *Service) Issue(ctx context.Context, addr tron.Address, purpose Purpose) (Challenge, error) {
	if _, ok := ParsePurpose(string(purpose)); !ok {
		return Challenge{}, fmt.Errorf("signup: unknown purpose %q", purpose)
	}
	nonce, err := s.o.NewNonce()
	if err != nil {
		return Challenge{}, fmt.Errorf("signup: nonce: %w", err)
	}
	if !nonceRE.MatchString(nonce) {
		return Challenge{}, errors.New("signup: nonce source returned a malformed nonce")
	}
	now := s.now()
	c := Challenge{Nonce: nonce, Address: addr, Purpose: purpose, IssuedAt: now, ExpiresAt: now.Add(s.o.ChallengeTTL)}
	c.Message = Message(MessageParams{
		Brand: s.o.Brand, Host: s.o.Host, Network: s.o.Network, Address: addr, Purpose: purpose,
		Nonce: nonce, IssuedAt: c.IssuedAt, ExpiresAt: c.ExpiresAt,
	})
	batch := &pgx.Batch{}
	batch.Queue(`DELETE FROM signup_challenges WHERE address = $1 AND expires_at < $2`, addr.String(), now)
	batch.Queue(`INSERT INTO signup_challenges (nonce, address, purpose, message, issued_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, nonce, addr.String(), string(purpose), c.Message, c.IssuedAt, c.ExpiresAt)
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return Challenge{}, fmt.Errorf("signup: store challenge: %w", err)
	}
	return c, nil
}

// Redeem verifies signature over the stored message of nonce and consumes the nonce. It
// succeeds only when the challenge exists, was issued for addr and for one of the allowed
// purposes, has not expired, has not been used, and signature (hex, 0x optional) recovers
// addr. Every failure is ErrChallengeInvalid.
//
// Single use: one transaction claims the challenge with a conditional UPDATE (consumed_at
// still null, not expired, right address and purpose), verifies the signature over the
// message it returned, and commits only when the signature is good. A concurrent
// redemption of the same nonce waits on the row lock and then finds consumed_at set, so
// exactly one wins. A bad signature rolls the claim back: someone who merely learned a
// nonce cannot burn it with garbage.
func (s *Service) Redeem(ctx context.Context, addr tron.Address, nonce, signature string, allowed ...Purpose) (Challenge, error) {
	if !nonceRE.MatchString(nonce) {
		return Challenge{}, ErrChallengeInvalid
	}
	purposes := make([]string, len(allowed))
	for i, p := range allowed {
		purposes[i] = string(p)
	}
	now := s.now()
	c := Challenge{Nonce: nonce, Address: addr}
	errBadSignature := errors.New("bad signature")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var purpose string
		err := tx.QueryRow(ctx, `UPDATE signup_challenges SET consumed_at = $2
			WHERE nonce = $1 AND consumed_at IS NULL AND expires_at > $2 AND address = $3 AND purpose = ANY($4)
			RETURNING purpose, message, issued_at, expires_at`, nonce, now, addr.String(), purposes).
			Scan(&purpose, &c.Message, &c.IssuedAt, &c.ExpiresAt)
		if err != nil {
			return err
		}
		c.Purpose = Purpose(purpose)
		if tron.VerifyMessageV2([]byte(c.Message), signature, addr) != nil {
			return errBadSignature // rolls the claim back
		}
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, errBadSignature) {
		return Challenge{}, ErrChallengeInvalid
	}
	if err != nil {
		return Challenge{}, fmt.Errorf("signup: redeem challenge: %w", err)
	}
	c.IssuedAt, c.ExpiresAt = c.IssuedAt.UTC(), c.ExpiresAt.UTC()
	return c, nil
}

// Token is a bootstrap token. Secret is set only by IssueToken; it is the bearer value
// (abt_...) and must be shown to the caller once and never logged.
type Token struct {
	Secret    string
	Hash      []byte
	Address   tron.Address
	AccountID string // "" while the address owns no account
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// TokenHash is how a bootstrap token is keyed: SHA-256 of the whole bearer string.
func TokenHash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// IssueToken makes a bootstrap token for addr, bound to accountID when the address already
// owns an account ("" otherwise).
func (s *Service) IssueToken(ctx context.Context, addr tron.Address, accountID string) (Token, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Token{}, err
	}
	now := s.now()
	t := Token{
		Secret: TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), Address: addr, AccountID: accountID,
		IssuedAt: now, ExpiresAt: now.Add(s.o.TokenTTL),
	}
	t.Hash = TokenHash(t.Secret)
	_, err := s.pool.Exec(ctx, `INSERT INTO bootstrap_tokens (token_hash, address, account_id, issued_at, expires_at)
		VALUES ($1, $2, NULLIF($3, ''), $4, $5)`, t.Hash, addr.String(), accountID, t.IssuedAt, t.ExpiresAt)
	if err != nil {
		return Token{}, fmt.Errorf("signup: store bootstrap token: %w", err)
	}
	return t, nil
}

// LookupToken returns the live token for a bearer value. Lookup is by hash, so no stored
// value is ever compared byte by byte with the secret (nothing for a timing attack to
// measure). An unknown, malformed or expired token is ErrTokenInvalid.
func (s *Service) LookupToken(ctx context.Context, secret string) (Token, error) {
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) > 128 {
		return Token{}, ErrTokenInvalid
	}
	t := Token{Hash: TokenHash(secret)}
	var address string
	var account *string
	err := s.pool.QueryRow(ctx, `SELECT address, account_id, issued_at, expires_at FROM bootstrap_tokens
		WHERE token_hash = $1`, t.Hash).Scan(&address, &account, &t.IssuedAt, &t.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Token{}, ErrTokenInvalid
	}
	if err != nil {
		return Token{}, fmt.Errorf("signup: read bootstrap token: %w", err)
	}
	if !s.now().Before(t.ExpiresAt) {
		return Token{}, ErrTokenInvalid
	}
	if t.Address, err = tron.ParseAddress(address); err != nil {
		return Token{}, fmt.Errorf("signup: stored token address: %w", err)
	}
	if account != nil {
		t.AccountID = *account
	}
	t.IssuedAt, t.ExpiresAt = t.IssuedAt.UTC(), t.ExpiresAt.UTC()
	return t, nil
}

// BindToken records that the token's address now owns accountID. It only fills an empty
// binding: a token never moves from one account to another.
func (s *Service) BindToken(ctx context.Context, hash []byte, accountID string) error {
	_, err := s.pool.Exec(ctx, `UPDATE bootstrap_tokens SET account_id = $2
		WHERE token_hash = $1 AND account_id IS NULL`, hash, accountID)
	if err != nil {
		return fmt.Errorf("signup: bind bootstrap token: %w", err)
	}
	return nil
}

// Prune deletes challenges and tokens that expired before cutoff. A periodic job may call
// it; correctness never depends on it (expired rows are refused on read).
func (s *Service) Prune(ctx context.Context, cutoff time.Time) error {
	batch := &pgx.Batch{}
	batch.Queue(`DELETE FROM signup_challenges WHERE expires_at < $1`, cutoff)
	batch.Queue(`DELETE FROM bootstrap_tokens WHERE expires_at < $1`, cutoff)
	return s.pool.SendBatch(ctx, batch).Close()
}
