package tronsim

import (
	"maps"
	"math/bits"
	"slices"
	"sort"

	"rental/infra/tron"
)

const (
	trxPrecision = 1_000_000
	// delegatePeriodBlocks is java-tron's DELEGATE_PERIOD (3 days) in blocks: the lock
	// period used when lock is set and lock_period is 0.
	delegatePeriodBlocks = 3 * 86_400_000 / BlockTimeMs
	// windowMs is the 24 h resource recovery window of energy and bandwidth usage.
	windowMs = 86_400_000
)

// account mirrors the parts of protocol.Account the simulator models. Like java-tron,
// FrozenEnergy/FrozenBandwidth are the staked amounts still at the owner's disposal:
// delegating moves SUN from Frozen* to DelegatedOut*, so own total stake is the sum.
type account struct {
	Balance    int64 `json:"balance"`
	CreateTime int64 `json:"create_time"`
	IsContract bool  `json:"is_contract,omitempty"`

	FrozenEnergy          int64 `json:"frozen_energy,omitempty"`
	FrozenBandwidth       int64 `json:"frozen_bandwidth,omitempty"`
	DelegatedOutEnergy    int64 `json:"delegated_out_energy,omitempty"`
	DelegatedOutBandwidth int64 `json:"delegated_out_bandwidth,omitempty"`
	AcquiredEnergy        int64 `json:"acquired_energy,omitempty"`
	AcquiredBandwidth     int64 `json:"acquired_bandwidth,omitempty"`

	// EnergyUsage is energy consumed from stake as of EnergyTime (chain ms); it recovers
	// linearly over 24 h like java-tron's window.
	EnergyUsage int64 `json:"energy_usage,omitempty"`
	EnergyTime  int64 `json:"energy_time,omitempty"`
	// NetUsage and FreeNetUsage are staked and free bandwidth consumed as of their times
	// (chain ms), recovering over 24 h like EnergyUsage.
	NetUsage     int64 `json:"net_usage,omitempty"`
	NetTime      int64 `json:"net_time,omitempty"`
	FreeNetUsage int64 `json:"free_net_usage,omitempty"`
	FreeNetTime  int64 `json:"free_net_time,omitempty"`

	// Perms are the permissions set by AccountPermissionUpdateContract; nil means
	// java-tron's defaults (permission.go).
	Perms *accountPerms `json:"perms,omitempty"`
}

// delegKey identifies a delegation record. java-tron keeps a locked and an unlocked record
// per (from, to) pair (DelegatedResourceCapsule.createDbKeyV2), each with both resources.
type delegKey struct {
	From tron.Address
	To   tron.Address
	Lock bool
}

// delegation is protocol.DelegatedResource (V2). Expire times are chain ms and only set on
// the locked record.
type delegation struct {
	From            tron.Address `json:"from"`
	To              tron.Address `json:"to"`
	Lock            bool         `json:"lock,omitempty"`
	Energy          int64        `json:"energy,omitempty"`
	Bandwidth       int64        `json:"bandwidth,omitempty"`
	ExpireEnergy    int64        `json:"expire_energy,omitempty"`
	ExpireBandwidth int64        `json:"expire_bandwidth,omitempty"`
}

func (d delegation) key() delegKey { return delegKey{d.From, d.To, d.Lock} }

// state is everything a block changes. Maps hold values, so clone is a shallow map copy.
type state struct {
	Accounts    map[tron.Address]account
	Delegations map[delegKey]delegation
	USDT        map[tron.Address]int64
	// Stakes made inside the simulator (SUN), the variable part of the total weights.
	StakedEnergy    int64
	StakedBandwidth int64
	// DeepRentals are the deep reserve's live rentals (deep.go), returned when they end.
	DeepRentals []deepRental
}

func newState() *state {
	return &state{
		Accounts:    map[tron.Address]account{},
		Delegations: map[delegKey]delegation{},
		USDT:        map[tron.Address]int64{},
	}
}

func (s *state) clone() *state {
	return &state{
		Accounts:        maps.Clone(s.Accounts),
		Delegations:     maps.Clone(s.Delegations),
		USDT:            maps.Clone(s.USDT),
		StakedEnergy:    s.StakedEnergy,
		StakedBandwidth: s.StakedBandwidth,
		DeepRentals:     slices.Clone(s.DeepRentals),
	}
}

// seed sets an account's balance and total stakes (POST /sim/accounts and genesis). A
// total stake below what the account has delegated out is raised to it.
func (s *state) seed(g GenesisAccount, now int64) account {
	a, ok := s.Accounts[g.Address]
	if !ok {
		a.CreateTime = now
	}
	a.Balance = g.BalanceSun
	s.StakedEnergy -= a.FrozenEnergy + a.DelegatedOutEnergy
	s.StakedBandwidth -= a.FrozenBandwidth + a.DelegatedOutBandwidth
	a.FrozenEnergy = max(0, g.StakeEnergySun-a.DelegatedOutEnergy)
	a.FrozenBandwidth = max(0, g.StakeBandwidthSun-a.DelegatedOutBandwidth)
	s.StakedEnergy += a.FrozenEnergy + a.DelegatedOutEnergy
	s.StakedBandwidth += a.FrozenBandwidth + a.DelegatedOutBandwidth
	s.Accounts[g.Address] = a
	if g.USDT > 0 {
		s.USDT[g.Address] = g.USDT
	}
	return a
}

// delegationsOf returns the records from `from` (when non-zero) to `to` (when non-zero),
// in a stable order.
func (s *state) delegationsOf(from, to tron.Address) []delegation {
	var out []delegation
	for k, d := range s.Delegations {
		if (!from.IsZero() && k.From != from) || (!to.IsZero() && k.To != to) {
			continue
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.From != b.From {
			return a.From.Hex() < b.From.Hex()
		}
		if a.To != b.To {
			return a.To.Hex() < b.To.Hex()
		}
		return !a.Lock && b.Lock
	})
	return out
}

// resources are the chain-wide totals at one block.
type resources struct {
	TotalEnergyLimit  int64
	TotalEnergyWeight int64 // TRX
	TotalNetLimit     int64
	TotalNetWeight    int64 // TRX
}

// totals computes TotalEnergyWeight and TotalNetWeight at block num: the configured base
// (the rest of the world), the stakes made in the simulator, and a deterministic drift.
func (s *state) totals(p ChainParams, num int64) resources {
	return resources{
		TotalEnergyLimit:  p.TotalEnergyLimit,
		TotalEnergyWeight: p.BaseEnergyWeight + s.StakedEnergy/trxPrecision + drift(p, num),
		TotalNetLimit:     p.TotalNetLimit,
		TotalNetWeight:    p.BaseNetWeight + s.StakedBandwidth/trxPrecision,
	}
}

// drift is a triangle wave in [-amp, amp] with the configured period.
func drift(p ChainParams, num int64) int64 {
	if p.EnergyWeightDrift == 0 || p.EnergyWeightPeriod < 2 {
		return 0
	}
	half := p.EnergyWeightPeriod / 2
	phase := num % p.EnergyWeightPeriod
	v := phase
	if phase > half {
		v = p.EnergyWeightPeriod - phase
	}
	return p.EnergyWeightDrift * (2*v - half) / half
}

// energyLimit is java-tron's calculateGlobalEnergyLimitV2: (own available stake + acquired
// delegations), in whole TRX, times TotalEnergyLimit / TotalEnergyWeight, integer math.
func energyLimit(a account, r resources) int64 {
	w := (a.FrozenEnergy + a.AcquiredEnergy) / trxPrecision
	if w <= 0 || r.TotalEnergyWeight <= 0 {
		return 0
	}
	return mulDiv(w, r.TotalEnergyLimit, r.TotalEnergyWeight)
}

// netLimit is the staked bandwidth limit (without the free 600).
func netLimit(a account, r resources) int64 {
	w := (a.FrozenBandwidth + a.AcquiredBandwidth) / trxPrecision
	if w <= 0 || r.TotalNetWeight <= 0 {
		return 0
	}
	return mulDiv(w, r.TotalNetLimit, r.TotalNetWeight)
}

// mulDiv is a*b/c for non-negative a, b and positive c, exact even when a*b overflows
// int64 (mainnet-sized weights times limits do).
func mulDiv(a, b, c int64) int64 {
	q, r := a/c, a%c
	hi, lo := bits.Mul64(uint64(r), uint64(b))
	// r < c, so r*b/c < b fits in 64 bits and Div64 cannot panic.
	quo, _ := bits.Div64(hi, lo, uint64(c))
	return q*b + int64(quo)
}

// usageAt is the energy usage recovered to time now (linear over the 24 h window).
func usageAt(usage, since, now int64) int64 {
	if usage <= 0 {
		return 0
	}
	elapsed := now - since
	if elapsed <= 0 {
		return usage
	}
	if elapsed >= windowMs {
		return 0
	}
	return mulDiv(usage, windowMs-elapsed, windowMs)
}
