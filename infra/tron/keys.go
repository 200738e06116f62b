package tron

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
)

// PrivateKey is a secp256k1 signing key. Its String never shows the key material. Its
// address is derived once, when the key is made: deriving it is a scalar multiplication,
// as costly as a signature, and every signature checks it.
type PrivateKey struct {
	k    *secp256k1.PrivateKey
	addr Address
}

func newKey(k *secp256k1.PrivateKey) PrivateKey {
	return PrivateKey{k: k, addr: PubKeyAddress(k.PubKey())}
}

// GenerateKey makes a new random key.
func GenerateKey() (PrivateKey, error) {
	k, err := secp256k1.GeneratePrivateKey()
	if err != nil {
		return PrivateKey{}, err
	}
	return newKey(k), nil
}

// ParsePrivateKey reads 32 bytes of hex (0x optional).
func ParsePrivateKey(s string) (PrivateKey, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil || len(b) != 32 {
		return PrivateKey{}, errors.New("private key: want 32 bytes of hex")
	}
	return newKey(secp256k1.PrivKeyFromBytes(b)), nil
}

// PrivateKeyFromBytes wraps 32 raw bytes (for example from an HD derivation).
func PrivateKeyFromBytes(b []byte) PrivateKey { return newKey(secp256k1.PrivKeyFromBytes(b)) }

// Address is the key's TRON address.
func (p PrivateKey) Address() Address { return p.addr }

// Hex returns the key material; only for writing key files and test vectors.
func (p PrivateKey) Hex() string { return hex.EncodeToString(p.k.Serialize()) }

// String keeps keys out of logs.
func (p PrivateKey) String() string { return "PrivateKey(" + p.Address().String() + ")" }

// SignHash signs a 32-byte digest and returns 65 bytes r||s||v with v in {27, 28}, the form
// TronWeb produces.
func (p PrivateKey) SignHash(hash []byte) ([]byte, error) {
	if len(hash) != 32 {
		return nil, fmt.Errorf("sign: digest is %d bytes, want 32", len(hash))
	}
	compact := ecdsa.SignCompact(p.k, hash, false) // [27+recid] || r || s
	sig := make([]byte, 65)
	copy(sig, compact[1:])
	sig[64] = compact[0]
	return sig, nil
}

// RecoverHash returns the address whose key made sig over hash. sig is r||s||v with v in
// {0, 1, 27, 28}.
func RecoverHash(hash, sig []byte) (Address, error) {
	if len(hash) != 32 {
		return Address{}, fmt.Errorf("recover: digest is %d bytes, want 32", len(hash))
	}
	if len(sig) != 65 {
		return Address{}, fmt.Errorf("recover: signature is %d bytes, want 65", len(sig))
	}
	v := sig[64]
	if v >= 27 {
		v -= 27
	}
	if v > 1 {
		return Address{}, errors.New("recover: bad recovery id")
	}
	compact := make([]byte, 65)
	compact[0] = 27 + v
	copy(compact[1:], sig[:64])
	pub, _, err := ecdsa.RecoverCompact(compact, hash)
	if err != nil {
		return Address{}, fmt.Errorf("recover: %w", err)
	}
	return PubKeyAddress(pub), nil
}

// MessageHashV2 is TronWeb's signMessageV2 digest (TIP-191 style):
// keccak256("\x19TRON Signed Message:\n" + decimal byte length + message).
func MessageHashV2(message []byte) []byte {
	return Keccak256([]byte("\x19TRON Signed Message:\n"+strconv.Itoa(len(message))), message)
}

// SignMessageV2 signs message the way TronWeb's signMessageV2 does; hex with 0x prefix.
func (p PrivateKey) SignMessageV2(message []byte) (string, error) {
	sig, err := p.SignHash(MessageHashV2(message))
	if err != nil {
		return "", err
	}
	return "0x" + hex.EncodeToString(sig), nil
}

// VerifyMessageV2 recovers the signer of a signMessageV2 signature (hex, 0x optional) and
// compares it with want.
func VerifyMessageV2(message []byte, signatureHex string, want Address) error {
	sig, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(signatureHex, "0x"), "0X"))
	if err != nil {
		return errors.New("signature: not hex")
	}
	got, err := RecoverHash(MessageHashV2(message), sig)
	if err != nil {
		return err
	}
	if got != want {
		return errors.New("signature: does not recover the address")
	}
	return nil
}
