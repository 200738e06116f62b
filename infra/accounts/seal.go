package accounts

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Sealer encrypts API key secrets at rest with AES-256-GCM. A sealed value is
//
//	version (1 byte, 1) || nonce (12 bytes) || ciphertext and tag
//
// with the key id as associated data, so a sealed secret copied onto another key's row
// does not open. The version byte leaves room for master-key rotation.
type Sealer struct {
	aead     cipher.AEAD
	previous []cipher.AEAD // master keys being rotated away from: Open tries them after aead
}

const sealVersion = 1

// NewSealer takes a 32-byte master key, and the master keys being rotated away from
// (API_KEY_MASTER_KEY_OLD): Seal uses masterKey only, Open also accepts values sealed under
// a previous key, so stages keep working while admin rotate-master-key re-encrypts.
func NewSealer(masterKey []byte, previous ...[]byte) (*Sealer, error) {
	aead, err := newAEAD(masterKey)
	if err != nil {
		return nil, err
	}
	s := &Sealer{aead: aead}
	for _, k := range previous {
		if k == nil {
			continue
		}
		a, err := newAEAD(k)
		if err != nil {
			return nil, fmt.Errorf("previous %w", err)
		}
		s.previous = append(s.previous, a)
	}
	return s, nil
}

func newAEAD(masterKey []byte) (cipher.AEAD, error) {
	if len(masterKey) != 32 {
		return nil, fmt.Errorf("accounts: master key must be 32 bytes (AES-256), got %d", len(masterKey))
	}
	block, err := aes.NewCipher(masterKey)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts secret for the key keyID.
func (s *Sealer) Seal(keyID string, secret []byte) []byte {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(secret)+s.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return s.aead.Seal(out, out[1:], secret, []byte(keyID))
}

// ErrUnseal is returned for a value that does not decrypt under this master key and id.
var ErrUnseal = errors.New("accounts: sealed secret does not open (wrong master key or key id)")

// Open decrypts a value made by Seal for keyID, under the master key or a previous one.
func (s *Sealer) Open(keyID string, sealed []byte) ([]byte, error) {
	if pt, err := open(s.aead, keyID, sealed); err == nil {
		return pt, nil
	}
	for _, a := range s.previous {
		if pt, err := open(a, keyID, sealed); err == nil {
			return pt, nil
		}
	}
	return nil, ErrUnseal
}

func open(aead cipher.AEAD, keyID string, sealed []byte) ([]byte, error) {
	ns := aead.NonceSize()
	if len(sealed) < 1+ns+aead.Overhead() || sealed[0] != sealVersion {
		return nil, ErrUnseal
	}
	pt, err := aead.Open(nil, sealed[1:1+ns], sealed[1+ns:], []byte(keyID))
	if err != nil {
		return nil, ErrUnseal
	}
	return pt, nil
}

// Sealed is a row holding a sealed secret: its id (the associated data) and account.
type Sealed struct {
	ID, AccountID string
	Enc           []byte
}

// ScanSealed scans "id, account_id, secret_enc".
func ScanSealed(r pgx.CollectableRow) (Sealed, error) {
	var x Sealed
	return x, r.Scan(&x.ID, &x.AccountID, &x.Enc)
}

// ErrNeitherKey is returned by Reseal for a value that opens under neither master key.
var ErrNeitherKey = errors.New("accounts: the secret opens under neither the old nor the new master key")

// Reseal turns a value sealed for id under from into one sealed under to, for a master
// key rotation. changed is false when sealed already opens under to (a rotation run again).
func Reseal(from, to *Sealer, id string, sealed []byte) (out []byte, changed bool, err error) {
	secret, err := from.Open(id, sealed)
	if err != nil {
		if _, err := to.Open(id, sealed); err == nil {
			return sealed, false, nil
		}
		return nil, false, ErrNeitherKey
	}
	return to.Seal(id, secret), true, nil
}
