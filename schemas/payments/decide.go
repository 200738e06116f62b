package payments

import (
	"errors"

	"rental/schemas/apierr"
	"rental/schemas/pricing"
)

// Decide is what a transfer of amountSun to the address of (res, tier) buys, priced from
// the snapshot s the way POST /v1/quotes prices it at that moment: the largest amount whose
// price is at most amountSun (less the activation fee when needsActivation: the receiver
// is known not to be activated). Whatever cannot be served is refunded whole: above
// MaxSun, below the row's minimum, a row off sale or paused, a book that cannot fill the
// minimum, activation the transfer does not pay for, and a transfer that pays more than
// the row's maximum amount (or the book's depth) by more than one unit's price.
func (r Rules) Decide(s pricing.Snapshot, res pricing.Resource, tier pricing.Tier, amountSun int64, needsActivation bool) Decision {
	if amountSun <= 0 {
		return r.Refund(0, ReasonBelowMinimum)
	}
	if r.MaxSun > 0 && amountSun > r.MaxSun {
		return r.Refund(amountSun, ReasonAboveMaximum)
	}
	budget, fee := amountSun, int64(0)
	if needsActivation {
		f, err := s.ActivationPriceSun()
		if err != nil {
			return r.Refund(amountSun, ReasonActivation)
		}
		fee, budget = f, amountSun-f
	}
	q, err := s.Affordable(res, tier, budget)
	if err != nil {
		if errors.Is(err, pricing.ErrBelowMinimum) || budget <= 0 {
			if _, without := s.Affordable(res, tier, amountSun); needsActivation && without == nil {
				return r.Refund(amountSun, ReasonActivation)
			}
			return r.Refund(amountSun, ReasonBelowMinimum)
		}
		switch apierr.As(err).Code {
		case apierr.TierUnavailable, apierr.SupplyPaused, apierr.ValidationFailed:
			return r.Refund(amountSun, ReasonRowUnavailable)
		}
		return r.Refund(amountSun, ReasonSupplyShort)
	}
	price := q.TotalAmountSun + fee
	kept := amountSun - price
	key := pricing.BookKey{Resource: res, Tier: tier}
	limit := min(s.Rules[key].MaxAmount, s.Books[key].Depth)
	// At the row's limit the search stopped for want of units, not of money: a surplus of
	// more than one unit's price is not "the rest of a unit" and goes back whole.
	if q.Amount >= limit && kept > q.PriceSunPerUnit {
		if s.Books[key].Depth < s.Rules[key].MaxAmount {
			return r.Refund(amountSun, ReasonSupplyShort)
		}
		return r.Refund(amountSun, ReasonAboveRow)
	}
	return Decision{Order: true, Amount: q.Amount, Activate: needsActivation, PriceSun: price, KeptSun: kept}
}
