package accounts

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/pg"
	"rental/schemas/apierr"
	"rental/schemas/network"
)

// Key is an API key record. The secret is not part of it: it exists in plaintext only in
// CreatedKey (once, at creation) and in AuthKey (for signature checks).
type Key struct {
	ID          string
	AccountID   string
	Scopes      []string
	Label       *string
	IsActive    bool
	IPAllowlist []netip.Prefix // empty: any address
	ExpiresAt   *time.Time
	RevokedAt   *time.Time
	LastUsedAt  *time.Time
	CreatedAt   time.Time
}

// Expired reports whether the key is past its expires_at at now.
func (k Key) Expired(now time.Time) bool { return k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) }

// AllowsIP reports whether ip may use the key (an empty allowlist allows every address).
func (k Key) AllowsIP(ip netip.Addr) bool {
	if len(k.IPAllowlist) == 0 {
		return true
	}
	ip = ip.Unmap()
	for _, p := range k.IPAllowlist {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// NewKey is what a caller chooses for a new key. Validation of scopes against the
// vocabulary is the caller's (the edge); the store only refuses an empty set.
type NewKey struct {
	Scopes      []string
	Label       *string
	ExpiresAt   *time.Time
	IPAllowlist []netip.Prefix
}

// CreatedKey is a new key with its secret, which is never available again.
type CreatedKey struct {
	Key
	Secret string
}

// KeyUpdate changes a key; nil fields are left alone. SetLabel with Label nil clears it.
type KeyUpdate struct {
	SetLabel    bool
	Label       *string
	IsActive    *bool
	IPAllowlist *[]netip.Prefix
	// Caller is the key making the change, nil for the account's owner (a session): a
	// change that widens the key (reactivation, an allowlist not inside the old one) must
	// leave it Within the caller, else nothing changes (1005 or 1015).
	Caller *Key
}

// Empty reports whether u changes nothing.
func (u KeyUpdate) Empty() bool { return !u.SetLabel && u.IsActive == nil && u.IPAllowlist == nil }

// AuthKey is what signature verification needs about a key, secret included.
type AuthKey struct {
	Key
	Secret         []byte
	AccountStatus  string
	AccountNetwork network.Network
}

const keyCols = `k.id, k.account_id, k.scopes, k.label, k.is_active, k.ip_allowlist, k.expires_at, k.revoked_at, k.last_used_at, k.created_at`

func scanKey(row pgx.Row, extra ...any) (Key, error) {
	var k Key
	var allow []string
	dst := append([]any{&k.ID, &k.AccountID, &k.Scopes, &k.Label, &k.IsActive, &allow, &k.ExpiresAt, &k.RevokedAt, &k.LastUsedAt, &k.CreatedAt}, extra...)
	if err := row.Scan(dst...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Key{}, ErrNotFound
		}
		return Key{}, err
	}
	for _, a := range allow {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			return Key{}, fmt.Errorf("accounts: key %s: stored allowlist entry %q: %w", k.ID, a, err)
		}
		k.IPAllowlist = append(k.IPAllowlist, p)
	}
	return k, nil
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Masked().String())
	}
	return out
}

// newCredentials makes a key id and secret with the network's prefixes: 128 random bits of
// id (hex) and 256 random bits of secret (base64url).
func newCredentials(net network.Network) (id, secret string) {
	var a [16]byte
	var b [32]byte
	if _, err := rand.Read(a[:]); err != nil {
		panic(err)
	}
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return net.KeyIDPrefix() + hex.EncodeToString(a[:]), net.SecretPrefix() + base64.RawURLEncoding.EncodeToString(b[:])
}

// keyIDHex is the length of a key id after its prefix: 128 bits in lowercase hex.
const keyIDHex = 32

// ValidKeyID reports whether id has the exact form of a key id of net (its prefix and 32
// lowercase hex characters). Anything else can never exist, so an authenticator answers
// it without a lookup.
func ValidKeyID(net network.Network, id string) bool {
	rest, ok := strings.CutPrefix(id, net.KeyIDPrefix())
	if !ok || len(rest) != keyIDHex {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CreateKey creates a key in its own transaction; see CreateKeyTx.
func (s *Store) CreateKey(ctx context.Context, accountID string, nk NewKey, actor string) (CreatedKey, error) {
	var ck CreatedKey
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		ck, err = s.CreateKeyTx(ctx, tx, accountID, nk, actor)
		return err
	})
	return ck, err
}

// CreateKeyTx creates a key for the account inside tx and writes the audit row
// "api_key.create". The active-key limit is enforced race-free: the account row is locked
// for the rest of tx, so concurrent creations for one account count one after the other.
// Over the limit it returns 3017 api_key_limit_reached with details.limit and details.used.
// Keys count as active until revoked or expired (a deactivated key can be reactivated, so it
// still counts).
func (s *Store) CreateKeyTx(ctx context.Context, tx pgx.Tx, accountID string, nk NewKey, actor string) (CreatedKey, error) {
	if s.sealer == nil {
		return CreatedKey{}, errors.New("accounts: no master key configured; API keys cannot be created")
	}
	if len(nk.Scopes) == 0 {
		return CreatedKey{}, errors.New("accounts: a key needs at least one scope")
	}
	var netName string
	err := tx.QueryRow(ctx, `SELECT network FROM accounts WHERE id = $1 FOR UPDATE`, accountID).Scan(&netName)
	if errors.Is(err, pgx.ErrNoRows) {
		return CreatedKey{}, ErrNotFound
	}
	if err != nil {
		return CreatedKey{}, err
	}
	var used int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE account_id = $1
		AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, accountID).Scan(&used); err != nil {
		return CreatedKey{}, err
	}
	if used >= s.maxKey {
		return CreatedKey{}, apierr.APIKeyLimitReached.Newf("the account already has %d active API keys; revoke one first", used).
			With("limit", s.maxKey).With("used", used)
	}
	id, secret := newCredentials(network.Network(netName))
	k, err := scanKey(tx.QueryRow(ctx, `
		INSERT INTO api_keys AS k (id, account_id, secret_enc, scopes, label, ip_allowlist, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		RETURNING `+keyCols,
		id, accountID, s.sealer.Seal(id, []byte(secret)), nk.Scopes, nk.Label, prefixStrings(nk.IPAllowlist), nk.ExpiresAt))
	if err != nil {
		return CreatedKey{}, err
	}
	if err := WriteAudit(ctx, tx, accountID, actor, "api_key.create", map[string]any{"key_id": id, "scopes": nk.Scopes}); err != nil {
		return CreatedKey{}, err
	}
	return CreatedKey{Key: k, Secret: secret}, nil
}

// ListKeys lists the account's keys that are not revoked, oldest first.
func (s *Store) ListKeys(ctx context.Context, accountID string) ([]Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyCols+` FROM api_keys k
		WHERE k.account_id = $1 AND k.revoked_at IS NULL ORDER BY k.created_at, k.id`, accountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Key{}
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// UpdateKey changes a key of the account and writes the audit row "api_key.update".
// ErrNotFound when the key does not exist, belongs to another account or is revoked.
func (s *Store) UpdateKey(ctx context.Context, accountID, keyID string, u KeyUpdate, actor string) (Key, error) {
	var allow []string
	if u.IPAllowlist != nil {
		allow = prefixStrings(*u.IPAllowlist)
	}
	var k Key
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if u.Caller != nil {
			if err := checkWithin(ctx, tx, accountID, keyID, u); err != nil {
				return err
			}
		}
		var err error
		k, err = scanKey(tx.QueryRow(ctx, `
			UPDATE api_keys AS k SET
				label = CASE WHEN $3 THEN $4 ELSE k.label END,
				is_active = COALESCE($5, k.is_active),
				ip_allowlist = COALESCE($6, k.ip_allowlist)
			WHERE k.account_id = $1 AND k.id = $2 AND k.revoked_at IS NULL
			RETURNING `+keyCols, accountID, keyID, u.SetLabel, u.Label, u.IsActive, allow))
		if err != nil {
			return err
		}
		d := map[string]any{"key_id": keyID}
		if u.IsActive != nil {
			d["is_active"] = *u.IsActive
		}
		if u.IPAllowlist != nil {
			d["ip_allowlist"] = allow
		}
		if u.SetLabel {
			d["label"] = u.Label
		}
		return WriteAudit(ctx, tx, accountID, actor, "api_key.update", d)
	})
	return k, err
}

// checkWithin locks the key for the rest of tx and refuses u when it widens the key beyond
// u.Caller (Within).
func checkWithin(ctx context.Context, tx pgx.Tx, accountID, keyID string, u KeyUpdate) error {
	before, err := scanKey(tx.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys k
		WHERE k.account_id = $1 AND k.id = $2 AND k.revoked_at IS NULL FOR UPDATE`, accountID, keyID))
	if err != nil {
		return err
	}
	after := before
	if u.IsActive != nil {
		after.IsActive = *u.IsActive
	}
	if u.IPAllowlist != nil {
		after.IPAllowlist = *u.IPAllowlist
	}
	if !widens(before, after) {
		return nil
	}
	field := "is_active"
	if !AllowlistWithin(after.IPAllowlist, before.IPAllowlist) {
		field = "ip_allowlist"
	}
	return Within(*u.Caller, after.Scopes, after.ExpiresAt, after.IPAllowlist, field)
}

// RevokeKey revokes a key of the account for good and writes the audit row
// "api_key.revoke". Revoking a revoked key succeeds again without a new audit row (DELETE
// is idempotent). ErrNotFound when the key does not exist or belongs to another account.
func (s *Store) RevokeKey(ctx context.Context, accountID, keyID, actor string) error {
	_, err := s.revokeKey(ctx, accountID, keyID, actor, map[string]any{"key_id": keyID})
	return err
}

// RevokeKeyAsSupport revokes a key of any account for support (the admin tool): the audit
// row "api_key.revoke" names the actor and the reason. It returns the key's account and
// whether the key was revoked now (false: it already was). ErrNotFound for an unknown key.
// Edge replicas stop accepting the key within KEY_CACHE_TTL.
func (s *Store) RevokeKeyAsSupport(ctx context.Context, keyID, actor, reason string) (accountID string, revokedNow bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT account_id FROM api_keys WHERE id = $1`, keyID).Scan(&accountID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, ErrNotFound
	}
	if err != nil {
		return "", false, err
	}
	revokedNow, err = s.revokeKey(ctx, accountID, keyID, actor, map[string]any{"key_id": keyID, "reason": reason})
	return accountID, revokedNow, err
}

func (s *Store) revokeKey(ctx context.Context, accountID, keyID, actor string, details map[string]any) (bool, error) {
	now := false
	err := pg.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var revoked *time.Time
		err := tx.QueryRow(ctx, `SELECT revoked_at FROM api_keys WHERE account_id = $1 AND id = $2 FOR UPDATE`,
			accountID, keyID).Scan(&revoked)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil || revoked != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE id = $1`, keyID); err != nil {
			return err
		}
		now = true
		return WriteAudit(ctx, tx, accountID, actor, "api_key.revoke", details)
	})
	return now, err
}

// Rekey re-encrypts every API key secret sealed under from so that it is sealed under to,
// inside tx, and returns how many it re-encrypted per account. A secret that already opens
// under to is left alone (a repeated rotation changes nothing); one that opens under
// neither fails the whole rotation, so nothing is left half-rotated.
func Rekey(ctx context.Context, tx pgx.Tx, from, to *Sealer) (map[string]int, error) {
	rows, err := tx.Query(ctx, `SELECT id, account_id, secret_enc FROM api_keys ORDER BY id FOR UPDATE`)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, ScanSealed)
	if err != nil {
		return nil, err
	}
	done := map[string]int{}
	for _, x := range all {
		enc, changed, err := Reseal(from, to, x.ID, x.Enc)
		if err != nil {
			return nil, fmt.Errorf("api key %s: %w", x.ID, err)
		}
		if !changed {
			continue
		}
		if _, err := tx.Exec(ctx, `UPDATE api_keys SET secret_enc = $2 WHERE id = $1`, x.ID, enc); err != nil {
			return nil, err
		}
		done[x.AccountID]++
	}
	return done, nil
}

// KeyForAuth reads a key with its decrypted secret and its account's status, for
// signature verification. Revoked, expired and inactive keys are returned too: the caller
// answers each with its own code. ErrNotFound for an unknown id.
func (s *Store) KeyForAuth(ctx context.Context, keyID string) (AuthKey, error) {
	if s.sealer == nil {
		return AuthKey{}, errors.New("accounts: no master key configured; API keys cannot be verified")
	}
	var ak AuthKey
	var sealed []byte
	var netName string
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyCols+`, k.secret_enc, a.status, a.network
		FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = $1`, keyID),
		&sealed, &ak.AccountStatus, &netName)
	if err != nil {
		return AuthKey{}, err
	}
	secret, err := s.sealer.Open(k.ID, sealed)
	if err != nil {
		return AuthKey{}, fmt.Errorf("accounts: key %s: %w", k.ID, err)
	}
	ak.Key, ak.Secret, ak.AccountNetwork = k, secret, network.Network(netName)
	return ak, nil
}

// KeysForAuth is KeyForAuth for several keys in one query; a key that does not exist is
// absent from the answer.
func (s *Store) KeysForAuth(ctx context.Context, keyIDs []string) (map[string]AuthKey, error) {
	if s.sealer == nil {
		return nil, errors.New("accounts: no master key configured; API keys cannot be verified")
	}
	rows, err := s.pool.Query(ctx, `SELECT `+keyCols+`, k.secret_enc, a.status, a.network
		FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = ANY($1::text[])`, keyIDs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[string]AuthKey, len(keyIDs))
	for rows.Next() {
		var ak AuthKey
		var sealed []byte
		var netName string
		k, err := scanKey(rows, &sealed, &ak.AccountStatus, &netName)
		if err != nil {
			return nil, err
		}
		secret, err := s.sealer.Open(k.ID, sealed)
		if err != nil {
			return nil, fmt.Errorf("accounts: key %s: %w", k.ID, err)
		}
		ak.Key, ak.Secret, ak.AccountNetwork = k, secret, network.Network(netName)
		out[k.ID] = ak
	}
	return out, rows.Err()
}

// TouchKey records a use of the key, at most once a minute per key (last_used_at is a
// coarse indicator, not an access log).
func (s *Store) TouchKey(ctx context.Context, keyID string) error {
	_, err := s.pool.Exec(ctx, `UPDATE api_keys SET last_used_at = now()
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`, keyID)
	return err
}
