// Package deposits issues and lists the deposit addresses of accounts. Each account gets
// its own TRON address derived with BIP32 from the service's HD key at
//
//	m/44'/195'/0'/0/<index>
//
// (BIP44, coin type 195 = TRX, account 0, external chain), where index comes from the
// Postgres sequence deposit_address_index_seq. No private key is stored or even needed here:
// the edge derives addresses from the public key of the external chain; only the sweeper,
// which holds the seed, derives the matching private keys.
//
// store.go issues and lists addresses (signup, issue 3); rotate.go adds rotation and the
// address lookup crediting uses, rate.go the USDT rate of the USDT row (issue 4).
package deposits

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"

	"rental/infra/tron"
)

// DevSeedHex is the fixed HD seed of the dev stack and tests. Its keys are public by
// construction: never use it where real money is deposited.
const DevSeedHex = "72656e74616c2d6465762d6f6e6c792d68642d736565642d6e6f742d666f722d6d61696e6e6574"

// Path is the derivation path of deposit address i, for documentation and logs.
func Path(i uint32) string { return fmt.Sprintf("m/44'/195'/0'/0/%d", i) }

// Deriver turns a derivation index into an address. It holds only the public extended key
// of m/44'/195'/0'/0, so it cannot produce private keys even if the process is dumped.
type Deriver struct {
	chain *hdkeychain.ExtendedKey // neutered
}

// NewDeriver accepts, in order of preference for production:
//   - an extended public key (xpub...) of the external chain m/44'/195'/0'/0 (depth 4), the
//     only form an edge should hold;
//   - an extended private key (xprv...) of the master (depth 0) or of that chain (depth 4);
//   - a hex BIP32 seed of 16 to 64 bytes (BIP39 mnemonics produce 64-byte seeds).
//
// Private material is used once to compute the chain's public key and then dropped.
func NewDeriver(key string) (*Deriver, error) {
	key = strings.TrimSpace(key)
	var k *hdkeychain.ExtendedKey
	switch {
	case strings.HasPrefix(key, "xpub") || strings.HasPrefix(key, "xprv"):
		ek, err := hdkeychain.NewKeyFromString(key)
		if err != nil {
			return nil, fmt.Errorf("deposits: HD key: %w", err)
		}
		k = ek
	default:
		seed, err := hex.DecodeString(strings.TrimPrefix(key, "0x"))
		if err != nil {
			return nil, errors.New("deposits: HD key is neither an xpub/xprv nor a hex seed")
		}
		if len(seed) < hdkeychain.MinSeedBytes || len(seed) > hdkeychain.MaxSeedBytes {
			return nil, fmt.Errorf("deposits: HD seed must be %d to %d bytes", hdkeychain.MinSeedBytes, hdkeychain.MaxSeedBytes)
		}
		if k, err = hdkeychain.NewMaster(seed, &chaincfg.MainNetParams); err != nil {
			return nil, fmt.Errorf("deposits: HD seed: %w", err)
		}
	}
	switch {
	case k.Depth() == 0 && k.IsPrivate():
		for _, i := range []uint32{44 + hdkeychain.HardenedKeyStart, 195 + hdkeychain.HardenedKeyStart, hdkeychain.HardenedKeyStart, 0} {
			child, err := k.Derive(i)
			if err != nil {
				return nil, fmt.Errorf("deposits: derive m/44'/195'/0'/0: %w", err)
			}
			k = child
		}
	case k.Depth() == 4:
	default:
		return nil, fmt.Errorf("deposits: HD key at depth %d: want a master key or the chain m/44'/195'/0'/0 (depth 4)", k.Depth())
	}
	pub, err := k.Neuter()
	if err != nil {
		return nil, fmt.Errorf("deposits: HD key: %w", err)
	}
	return &Deriver{chain: pub}, nil
}

// NewPublicDeriver accepts only an extended public key (xpub...) of m/44'/195'/0'/0: what
// the edge, which faces the internet, may hold. A private root (xprv or seed) is refused,
// naming where it belongs.
func NewPublicDeriver(key string) (*Deriver, error) {
	key = strings.TrimSpace(key)
	if !strings.HasPrefix(key, "xpub") {
		return nil, errors.New("deposits: want an extended public key (xpub) of m/44'/195'/0'/0; a private root (xprv or seed) belongs to the sweeper alone (DEPOSIT_HD_KEY), never to the edge")
	}
	return NewDeriver(key)
}

// XPub is the extended public key of m/44'/195'/0'/0, the value to configure on edges.
func (d *Deriver) XPub() string { return d.chain.String() }

// Address derives the address of index i (non-hardened, below 2^31).
func (d *Deriver) Address(i uint32) (tron.Address, error) {
	if i >= hdkeychain.HardenedKeyStart {
		return tron.Address{}, fmt.Errorf("deposits: index %d out of range", i)
	}
	child, err := d.chain.Derive(i)
	if err != nil {
		// BIP32: about 1 in 2^127 indexes is invalid; the caller takes the next one.
		return tron.Address{}, fmt.Errorf("deposits: derive index %d: %w", i, err)
	}
	pub, err := child.ECPubKey()
	if err != nil {
		return tron.Address{}, err
	}
	return tron.PubKeyAddress(pub), nil
}
