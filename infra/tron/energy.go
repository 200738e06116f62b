package tron

import (
	"errors"
	"math/big"
)

// SunPerTRX is the number of SUN in one TRX.
const SunPerTRX = 1_000_000

// ErrNoEnergyWeight is returned when the network reports no stake weight or limit, so no
// energy can be derived from a balance.
var ErrNoEnergyWeight = errors.New("energy: TotalEnergyLimit or TotalEnergyWeight is not positive")

// EnergyForBalance is the energy that balanceSun of staked (or delegated) TRX yields:
// balanceTRX × TotalEnergyLimit / TotalEnergyWeight, rounded down, with the weight and
// limit of getaccountresource. Exact integer math on SUN (big.Int, the product overflows
// int64 for large stakes). java-tron's EnergyProcessor.calculateGlobalEnergyLimitV2 does
// the same in double precision, so the node may differ by one unit; the weight moves every
// block anyway, so callers keep a margin.
func EnergyForBalance(balanceSun, totalEnergyLimit, totalEnergyWeight int64) (int64, error) {
	if totalEnergyLimit <= 0 || totalEnergyWeight <= 0 {
		return 0, ErrNoEnergyWeight
	}
	if balanceSun <= 0 {
		return 0, nil
	}
	n := new(big.Int).Mul(big.NewInt(balanceSun), big.NewInt(totalEnergyLimit))
	n.Quo(n, new(big.Int).Mul(big.NewInt(totalEnergyWeight), big.NewInt(SunPerTRX)))
	if !n.IsInt64() {
		return 0, errors.New("energy: result overflows int64")
	}
	return n.Int64(), nil
}

// BalanceForEnergy is the smallest balance in SUN whose EnergyForBalance is at least
// energy (the division rounds up). Delegations are in SUN, but java-tron refuses less
// than 1 TRX; rounding to whole TRX and adding a margin for weight drift is the caller's.
func BalanceForEnergy(energy, totalEnergyLimit, totalEnergyWeight int64) (int64, error) {
	if totalEnergyLimit <= 0 || totalEnergyWeight <= 0 {
		return 0, ErrNoEnergyWeight
	}
	if energy <= 0 {
		return 0, nil
	}
	n := new(big.Int).Mul(big.NewInt(energy), big.NewInt(totalEnergyWeight))
	n.Mul(n, big.NewInt(SunPerTRX))
	d := big.NewInt(totalEnergyLimit)
	// ceil(n / d) for positive n, d.
	n.Add(n, new(big.Int).Sub(d, big.NewInt(1)))
	n.Quo(n, d)
	if !n.IsInt64() {
		return 0, errors.New("energy: balance overflows int64")
	}
	return n.Int64(), nil
}
