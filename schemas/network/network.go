// Package network holds the rules that differ between the two environments of the
// service. NETWORK (mainnet or nile) selects one; nothing else may branch on it.
package network

import "fmt"

// Network is the value of the `network` field in responses and events.
type Network string

const (
	Mainnet Network = "mainnet"
	Nile    Network = "nile"
)

// Parse accepts exactly the two enum values of the spec.
func Parse(s string) (Network, error) {
	switch Network(s) {
	case Mainnet, Nile:
		return Network(s), nil
	}
	return "", fmt.Errorf("network %q: want mainnet or nile", s)
}

// MaxLockPeriodBlocks is the chain's cap on a delegation lock period, in 3-second blocks
// (30 days on mainnet, 5 days on nile).
func (n Network) MaxLockPeriodBlocks() int64 {
	if n == Nile {
		return 144_000
	}
	return 864_000
}

// UnfreezeDelayDays is how long unstaked TRX stays locked before withdrawal.
func (n Network) UnfreezeDelayDays() int {
	if n == Nile {
		return 1
	}
	return 14
}

// KeyIDPrefix and SecretPrefix are the API credential prefixes. The edge checks the prefix
// before looking a key up, so a key of the other environment fails with 1012.
func (n Network) KeyIDPrefix() string {
	if n == Nile {
		return "ak_test_"
	}
	return "ak_live_"
}

func (n Network) SecretPrefix() string {
	if n == Nile {
		return "sk_test_"
	}
	return "sk_live_"
}

// USDTContract is the TRC-20 USDT contract accepted for deposits on the real network.
// The simulator deploys its own and configuration may override this.
func (n Network) USDTContract() string {
	if n == Nile {
		return "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"
	}
	return "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
}

// USDTContractOrEmpty is USDTContract for a known network and "" otherwise, so that
// configuration can default to it before the network value is validated.
func (n Network) USDTContractOrEmpty() string {
	if n != Mainnet && n != Nile {
		return ""
	}
	return n.USDTContract()
}

// SellsOwnStake reports whether orders are filled from the service's own stake pools. On
// nile provider execution goes through one provider only, from its small fixed inventory
// (the spec's testnet differences), so the own pools neither appear in the order book nor
// deliver orders there.
func (n Network) SellsOwnStake() bool { return n != Nile }
