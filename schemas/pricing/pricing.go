// Package pricing is the pricing domain of the rental service: the price model operators
// edit (base prices, the day-part schedule, tier rows, volume tiers, limits, pauses), the
// order book built from supply (own pool, market providers, the on-chain deep reserve), the
// walk of an amount through that book, and the Snapshot that one pricing cycle produces.
//
// Contract:
//   - The package is pure: no I/O, no SQL, no HTTP. The pricer stage (processors/pricer)
//     loads the model and the supply, calls Build, and publishes the Snapshot; the edge reads
//     the latest Snapshot from memory through a SnapshotSource and calls Price / OrderBook on
//     it, so pricing a request never touches a database.
//   - Money is int64 SUN; prices with two decimals are Centisun (int64 hundredths of a SUN).
//     No float is used anywhere. The rounding rules are written next to each computation and
//     in docs/pricing.md.
//   - Errors are *apierr.Error values of the spec's catalogue (2001, 2003, 2008, 5001, 5006),
//     with the details keys the spec names, so the edge maps them without translation.
package pricing

import (
	"time"

	"rental/schemas/apierr"
	"rental/schemas/events"
)

// The record types are the contracts in schemas/events; these aliases let callers of the
// domain name them from here.
type (
	Resource        = events.Resource
	Tier            = events.Tier
	LevelClass      = events.LevelClass
	Centisun        = events.Centisun
	PriceTable      = events.PriceTable
	PriceItem       = events.PriceItem
	OrderBook       = events.OrderBook
	Level           = events.Level
	Fill            = events.Fill
	WalkResult      = events.Walk
	ActivationPrice = events.ActivationPrice
)

const (
	Energy     = events.Energy
	Bandwidth  = events.Bandwidth
	Activation = events.Activation

	Tier5m  = events.Tier5m
	Tier15m = events.Tier15m
	Tier1h  = events.Tier1h
	Tier1d  = events.Tier1d
	Tier3d  = events.Tier3d
	Tier30d = events.Tier30d

	ClassInstant = events.ClassInstant
	ClassMarket  = events.ClassMarket
	ClassDeep    = events.ClassDeep
)

// Tiers lists the tier enum in ascending duration.
var Tiers = []Tier{Tier5m, Tier15m, Tier1h, Tier1d, Tier3d, Tier30d}

var tierSeconds = map[Tier]int64{
	Tier5m: 300, Tier15m: 900, Tier1h: 3600, Tier1d: 86_400, Tier3d: 259_200, Tier30d: 2_592_000,
}

// ParseResource accepts the spec's resource enum; anything else is 2001 on field "resource".
func ParseResource(s string) (Resource, error) {
	switch r := Resource(s); r {
	case Energy, Bandwidth, Activation:
		return r, nil
	}
	return "", apierr.ValidationFailed.Newf("unknown resource %q", s).WithField("resource").
		With("constraint", "one of energy, bandwidth, activation")
}

// ParseTier accepts every tier of the enum, retired ones included (old orders must parse);
// whether a tier is sold is decided by the price rules. Anything else is 2001 on "tier".
func ParseTier(s string) (Tier, error) {
	if _, ok := tierSeconds[Tier(s)]; ok {
		return Tier(s), nil
	}
	return "", apierr.ValidationFailed.Newf("unknown tier %q", s).WithField("tier").
		With("constraint", "one of 5m, 15m, 1h, 1d, 3d, 30d")
}

// TierSeconds is the rental period of t in seconds (5m = 300, 1h = 3600, ...); 0 for a value
// outside the enum.
func TierSeconds(t Tier) int64 { return tierSeconds[t] }

// TierDuration is TierSeconds as a time.Duration.
func TierDuration(t Tier) time.Duration { return time.Duration(tierSeconds[t]) * time.Second }

// Retired reports whether t is one of the retired tiers (15m, 3d, 30d): never sold, never
// given a price row, kept only so that old records parse.
func Retired(t Tier) bool { return t == Tier15m || t == Tier3d || t == Tier30d }

// BookKey names one order book (and one price row).
type BookKey struct {
	Resource Resource
	Tier     Tier
}

func (k BookKey) String() string { return string(k.Resource) + ":" + string(k.Tier) }
