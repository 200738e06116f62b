package pricing

import (
	"errors"
	"slices"

	"rental/schemas/apierr"
)

// ErrBelowMinimum is Affordable finding that even the row's minimum amount costs more than
// the budget.
var ErrBelowMinimum = errors.New("pricing: the budget does not pay for the row's minimum amount")

// Affordable is what a transfer of budgetSun buys (pay by transfer, docs/pricing.md): the
// largest amount of (resource, tier) whose price, exactly as Price prices it (volume tiers
// and the book walk included), is at most budgetSun, with its quote. Errors: those of
// Price for the row itself (2003, 5006), ErrBelowMinimum, or 5001 when the book cannot fill
// even the minimum amount.
//
// The total price rises with the amount inside one volume tier (every unit costs a
// positive price) but may fall where a cheaper volume tier starts, so each volume tier's
// range is searched on its own (binary search) and the largest affordable amount wins.
func (s Snapshot) Affordable(resource Resource, tier Tier, budgetSun int64) (Quote, error) {
	rule, err := s.sellable(resource, tier)
	if err != nil {
		return Quote{}, err
	}
	hi := rule.MaxAmount
	if depth := s.Books[BookKey{resource, tier}].Depth; depth < hi {
		hi = depth
	}
	if hi < rule.MinAmount {
		_, err := s.Price(resource, tier, rule.MinAmount)
		return Quote{}, err
	}
	starts := []int64{rule.MinAmount}
	for _, v := range rule.VolumeTiers {
		if v.MinAmount > rule.MinAmount && v.MinAmount <= hi {
			starts = append(starts, v.MinAmount)
		}
	}
	slices.Sort(starts)
	starts = slices.Compact(starts)
	var best Quote
	found := false
	// From the last range down: the first range with an affordable amount holds the largest.
	for i := len(starts) - 1; i >= 0 && !found; i-- {
		lo, end := starts[i], hi
		if i+1 < len(starts) {
			end = starts[i+1] - 1
		}
		q, err := s.Price(resource, tier, lo)
		if err != nil {
			if apierr.As(err).Code == apierr.InsufficientSupply {
				continue
			}
			return Quote{}, err
		}
		if q.TotalAmountSun > budgetSun {
			continue
		}
		best, found = q, true
		// Invariant: price(lo) <= budget; find the largest n in [lo, end] with price(n) <= budget.
		for lo < end {
			mid := lo + (end-lo+1)/2
			q, err := s.Price(resource, tier, mid)
			if err == nil && q.TotalAmountSun <= budgetSun {
				lo, best = mid, q
			} else {
				end = mid - 1
			}
		}
	}
	if !found {
		if _, err := s.Price(resource, tier, rule.MinAmount); err != nil {
			return Quote{}, err
		}
		return Quote{}, ErrBelowMinimum
	}
	return best, nil
}
