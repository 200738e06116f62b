package orderflow

import (
	"errors"
	"fmt"

	"rental/infra/tron"
)

// The pools and the keys that sign for them (infra/custody). Delegations and reclaims are
// signed by a signer key under the pool's delegate permission, never by the pool's owner
// key, which no stage holds; activations and deep rentals are paid from the payer's own
// account (the first signer key), with its own owner permission.

// errNoGrant is a delegation or reclaim of a pool no signer may use now: its permission
// is gone or changed on chain. A delegation fails at once (the fill is refunded like any
// refusal); a reclaim waits until the permission is back.
var errNoGrant = errors.New("no signer holds the pool's delegate permission")

// pools are the configured own pools.
func (f *Flow) pools() []tron.Address {
	if f.o.Signers == nil {
		return nil
	}
	return f.o.Signers.Pools()
}

// hasPools reports whether own stake can be sold here at all.
func (f *Flow) hasPools() bool { return len(f.pools()) > 0 && f.o.Network.SellsOwnStake() }

// payer is the account that pays activations and deep rentals.
func (f *Flow) payer() (tron.PrivateKey, bool) {
	if f.o.Signers == nil {
		return tron.PrivateKey{}, false
	}
	return f.o.Signers.Payer(), true
}

// signerFor returns the key and Permission_id that sign a contract owned by owner: the
// payer's own account under its owner permission (0), or a pool under its grant.
func (f *Flow) signerFor(owner tron.Address) (tron.PrivateKey, int32, error) {
	if p, ok := f.payer(); ok && p.Address() == owner {
		return p, 0, nil
	}
	if f.o.Signers == nil {
		return tron.PrivateKey{}, 0, fmt.Errorf("%w: %s (no pools configured)", errNoGrant, owner)
	}
	g, ok := f.o.Signers.Grant(owner)
	if !ok {
		why := f.o.Signers.Problems()[owner]
		if why == "" {
			why = "not a configured pool"
		}
		return tron.PrivateKey{}, 0, fmt.Errorf("%w: %s: %s", errNoGrant, owner, why)
	}
	return g.Key, g.PermissionID, nil
}
