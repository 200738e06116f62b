// Package tron holds the TRON primitives the service relies on: addresses, message and
// transaction signatures, the transaction codec and the java-tron HTTP API client.
package tron

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/mr-tron/base58"
	"golang.org/x/crypto/sha3"
)

// AddressPrefix is the first byte of every mainnet and nile address (0x41, "T..." in base58).
const AddressPrefix = 0x41

// AddressLen is the length of an address in bytes: prefix plus 20 bytes of key hash.
const AddressLen = 21

// Address is a 21-byte TRON address, 0x41 followed by the last 20 bytes of
// keccak256(uncompressed public key without its 0x04 byte). The zero value is invalid.
type Address [AddressLen]byte

// ErrInvalidAddress is wrapped by every parse failure; the edge maps it to 2007.
var ErrInvalidAddress = errors.New("invalid address")

// ParseAddress accepts the Base58Check form (T..., 34 characters) and the hex form
// (41 followed by 40 hex digits, with or without 0x). It checks length, prefix and checksum.
func ParseAddress(s string) (Address, error) {
	var a Address
	switch {
	case len(s) == 34 && s[0] == 'T':
		raw, err := base58.Decode(s)
		if err != nil {
			return a, fmt.Errorf("%w: not base58", ErrInvalidAddress)
		}
		if len(raw) != AddressLen+4 {
			return a, fmt.Errorf("%w: wrong length", ErrInvalidAddress)
		}
		sum := checksum(raw[:AddressLen])
		if !bytes.Equal(sum[:], raw[AddressLen:]) {
			return a, fmt.Errorf("%w: checksum mismatch", ErrInvalidAddress)
		}
		copy(a[:], raw[:AddressLen])
	case len(s) == 42 || (len(s) == 44 && (strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"))):
		raw, err := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"))
		if err != nil {
			return a, fmt.Errorf("%w: not hex", ErrInvalidAddress)
		}
		// A 42-character input that starts with 0x holds only 20 bytes; without this
		// check it was taken as an address with its last byte zeroed.
		if len(raw) != AddressLen {
			return a, fmt.Errorf("%w: wrong length", ErrInvalidAddress)
		}
		copy(a[:], raw)
	default:
		return a, fmt.Errorf("%w: wrong length", ErrInvalidAddress)
	}
	if a[0] != AddressPrefix {
		return Address{}, fmt.Errorf("%w: prefix is not 0x41", ErrInvalidAddress)
	}
	return a, nil
}

// MustAddress parses s and panics on failure; for constants and tests.
func MustAddress(s string) Address {
	a, err := ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

// AddressFromBytes takes 21 bytes with the 0x41 prefix, or 20 bytes without it (as in an
// EVM log topic or ABI word).
func AddressFromBytes(b []byte) (Address, error) {
	var a Address
	switch len(b) {
	case AddressLen:
		copy(a[:], b)
	case AddressLen - 1:
		a[0] = AddressPrefix
		copy(a[1:], b)
	default:
		return a, fmt.Errorf("%w: %d bytes", ErrInvalidAddress, len(b))
	}
	if a[0] != AddressPrefix {
		return Address{}, fmt.Errorf("%w: prefix is not 0x41", ErrInvalidAddress)
	}
	return a, nil
}

// String is the Base58Check form.
func (a Address) String() string {
	sum := checksum(a[:])
	return base58.Encode(append(a[:], sum[:]...))
}

// Hex is the 42-character hex form java-tron uses in JSON (41...).
func (a Address) Hex() string { return hex.EncodeToString(a[:]) }

// IsZero reports the zero value.
func (a Address) IsZero() bool { return a == Address{} }

// MarshalText renders the Base58Check form.
func (a Address) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText accepts either form.
func (a *Address) UnmarshalText(b []byte) error {
	v, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// PubKeyAddress derives the address of a secp256k1 public key.
func PubKeyAddress(pub *secp256k1.PublicKey) Address {
	h := Keccak256(pub.SerializeUncompressed()[1:])
	var a Address
	a[0] = AddressPrefix
	copy(a[1:], h[12:])
	return a
}

// Keccak256 is the legacy Keccak (not SHA3-256) used by TRON and Ethereum.
func Keccak256(parts ...[]byte) []byte {
	h := sha3.NewLegacyKeccak256()
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

func checksum(b []byte) [4]byte {
	h1 := sha256.Sum256(b)
	h2 := sha256.Sum256(h1[:])
	var c [4]byte
	copy(c[:], h2[:4])
	return c
}
