// Package payments holds the rules of pay by transfer without I/O (docs/pricing.md "Pay by
// transfer"): the price table's payment_addresses keys, the derivation index of each
// address, what a transfer of A SUN to a row's address buys, and the public statuses of
// GET /v1/payments/{txid}. infra/paystore stores payments; processors/payments acts on them.
package payments

import (
	"fmt"
	"slices"
	"strings"

	"rental/schemas/pricing"
)

// RowKey is a payment_addresses key: <resource>_<tier> ("energy_1h").
func RowKey(r pricing.Resource, t pricing.Tier) string { return string(r) + "_" + string(t) }

// ParseRowKey reads a payment_addresses key back.
func ParseRowKey(key string) (pricing.Resource, pricing.Tier, error) {
	r, t, ok := strings.Cut(key, "_")
	if !ok {
		return "", "", fmt.Errorf("payments: row key %q: want <resource>_<tier>", key)
	}
	res, err := pricing.ParseResource(r)
	if err != nil || res == pricing.Activation {
		return "", "", fmt.Errorf("payments: row key %q: unknown resource", key)
	}
	tier, err := pricing.ParseTier(t)
	if err != nil {
		return "", "", fmt.Errorf("payments: row key %q: unknown tier", key)
	}
	return res, tier, nil
}

// IndexBase is the first derivation index of payment addresses, m/44'/195'/0'/0/<index>
// (the deposit addresses' chain): deposit indexes stay below it (the sequence's MAXVALUE,
// migration 00040), so a payment address is never an account's deposit address.
const IndexBase uint32 = 0x7FFF0000

// resourceSlots and tierSlots fix each row's index: append only, never reorder, or the
// addresses published earlier would change.
var (
	resourceSlots = []pricing.Resource{pricing.Energy, pricing.Bandwidth}
	tierSlots     = []pricing.Tier{pricing.Tier5m, pricing.Tier15m, pricing.Tier1h, pricing.Tier1d, pricing.Tier3d, pricing.Tier30d}
)

// Index is the derivation index of the payment address of (resource, tier).
func Index(r pricing.Resource, t pricing.Tier) (uint32, error) {
	ri, ti := slices.Index(resourceSlots, r), slices.Index(tierSlots, t)
	if ri < 0 || ti < 0 {
		return 0, fmt.Errorf("payments: no payment address for %s %s", r, t)
	}
	return IndexBase + uint32(ri)*64 + uint32(ti), nil
}

// Rows lists the rows on sale in a snapshot, as (resource, tier) keys in the table's order.
func Rows(s pricing.Snapshot) []string {
	var keys []string
	for _, r := range resourceSlots {
		for _, t := range s.AvailableTiers(r) {
			keys = append(keys, RowKey(r, t))
		}
	}
	return keys
}

// Public statuses of GET /v1/payments/{txid}.
const (
	StatusSeen       = "seen"
	StatusDelivering = "delivering"
	StatusDelivered  = "delivered"
	StatusRefunded   = "refunded"
	StatusFailed     = "failed"
)

// Stored statuses (infra/paystore, migration 00040).
const (
	StoredSeen       = "seen"
	StoredDelivering = "delivering"
	StoredDelivered  = "delivered"
	StoredRefunding  = "refunding"
	StoredRefunded   = "refunded"
	StoredKept       = "kept"
	StoredHeld       = "held"
	StoredReverted   = "reverted"
)

// PublicStatus maps a stored status to the public one: a signed refund is `refunded` (it
// is broadcast again until it lands; refund_txid names it), and a transfer nothing is
// given back for (dust, a token held for support, a fork's removal) is `failed` with its
// reason.
func PublicStatus(stored string) string {
	switch stored {
	case StoredSeen:
		return StatusSeen
	case StoredDelivering:
		return StatusDelivering
	case StoredDelivered:
		return StatusDelivered
	case StoredRefunding, StoredRefunded:
		return StatusRefunded
	}
	return StatusFailed
}

// Reasons a transfer is refunded or kept.
const (
	ReasonBelowMinimum    = "below_minimum"     // A pays less than the row's minimum amount
	ReasonAboveMaximum    = "above_maximum"     // A above PAY_MAX_SUN
	ReasonAboveRow        = "above_row_maximum" // A pays more than the row's maximum (or the book's depth) by over one unit
	ReasonRowUnavailable  = "row_unavailable"   // the row is paused or off sale
	ReasonSupplyShort     = "supply_short"      // the book or the committed supply cannot fill it
	ReasonActivation      = "activation_unpaid" // the receiver needs activation and A does not pay for it
	ReasonReceiver        = "receiver_refused"  // the receiver cannot be served (an own address, a ceiling)
	ReasonDeliveryFailed  = "delivery_failed"   // the order failed: nothing was delivered
	ReasonDust            = "dust"              // a refund below PAY_DUST_SUN is kept
	ReasonToken           = "token_held"        // a token transfer: held for support
	ReasonReverted        = "reverted"          // a fork removed the transfer before it was acted on
	ReasonReclaimedByFork = "fork_reclaimed"    // a fork removed the transfer after delivery; the delegation is taken back
)

// Rules are the operator's bounds of pay by transfer.
type Rules struct {
	MaxSun  int64 // PAY_MAX_SUN: larger transfers are refunded whole
	DustSun int64 // PAY_DUST_SUN: a refund below it is kept (and counted)
}

// Decision is what a transfer buys.
type Decision struct {
	// Order is true when an order is placed: Amount units, Activate when the receiver
	// needs activation, PriceSun its total (activation included), KeptSun = A - PriceSun.
	Order    bool
	Amount   int64
	Activate bool
	PriceSun int64
	KeptSun  int64
	// RefundSun is given back (no order); when it would be below the dust threshold it is
	// kept instead (KeptSun) with Reason dust.
	RefundSun int64
	Reason    string
}

// Refund is the decision to give amountSun back for reason, or to keep it when it is dust.
func (r Rules) Refund(amountSun int64, reason string) Decision {
	if amountSun < r.DustSun {
		return Decision{KeptSun: amountSun, Reason: ReasonDust}
	}
	return Decision{RefundSun: amountSun, Reason: reason}
}
