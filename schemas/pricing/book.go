package pricing

import (
	"slices"
)

// Offer is supply that can be bought for one (resource, tier): a market provider's offer or
// the deep reserve contract's. Cost is the price per unit for the whole rental that the
// platform pays; the book sells it at cost plus the model's markup for the class.
type Offer struct {
	Class    LevelClass // ClassMarket or ClassDeep
	Source   string     // provider slug, or the deep contract's name
	Resource Resource
	Tier     Tier
	Cost     Centisun
	Amount   int64
}

// Supply is what one pricing cycle found available.
type Supply struct {
	// Instant is the own stake pool inventory per resource, in units. The same pool serves
	// every tier, so each book of the resource shows all of it.
	Instant map[Resource]int64
	// Offers are market and deep offers; offers of a class the model does not know, with no
	// amount, or for another resource or tier are ignored by the book they do not match.
	Offers []Offer
}

var classRank = map[LevelClass]int{ClassInstant: 0, ClassMarket: 1, ClassDeep: 2}

// buildLevels returns the levels of one book, cheapest first.
//   - instant: the own pool at the row's list price (day-part applied);
//   - market and deep: each offer at cost plus markup, rounded up to 0.01 SUN, and never
//     below the list price, so the list price is the floor of a book that has own stock and
//     a customer never gets resold supply cheaper than the platform's own price.
//
// Levels of the same class and price are merged. Ties in price keep instant before market
// before deep: own stock is used first.
func buildLevels(m Model, key BookKey, list Centisun, s Supply) ([]Level, error) {
	var levels []Level
	if a := s.Instant[key.Resource]; a > 0 {
		levels = append(levels, Level{PriceSun: list, Amount: a, Class: ClassInstant})
	}
	for _, o := range s.Offers {
		if o.Resource != key.Resource || o.Tier != key.Tier || o.Amount <= 0 || o.Cost <= 0 {
			continue
		}
		var markup int64
		switch o.Class {
		case ClassMarket:
			markup = m.MarketMarkupBPS
		case ClassDeep:
			markup = m.DeepMarkupBPS
		default:
			continue
		}
		p, err := MarkupBPS(o.Cost, markup)
		if err != nil {
			return nil, err
		}
		levels = append(levels, Level{PriceSun: max(p, list), Amount: o.Amount, Class: o.Class})
	}
	slices.SortStableFunc(levels, func(a, b Level) int {
		if a.PriceSun != b.PriceSun {
			if a.PriceSun < b.PriceSun {
				return -1
			}
			return 1
		}
		return classRank[a.Class] - classRank[b.Class]
	})
	merged := levels[:0]
	for _, l := range levels {
		if n := len(merged); n > 0 && merged[n-1].PriceSun == l.PriceSun && merged[n-1].Class == l.Class {
			if merged[n-1].Amount > 1<<62-l.Amount {
				return nil, errOverflow
			}
			merged[n-1].Amount += l.Amount
			continue
		}
		merged = append(merged, l)
	}
	return merged, nil
}

// walk fills amount from the cheapest level upward. Instant fills are priced at instantPrice
// (the volume-tier price for the whole order size, never above the instant level's list
// price); other fills at their level's price.
//
// Rounding: the exact cost is the sum of price x amount in Centisun. TotalSun is that sum
// rounded up to whole SUN. UnitPriceSun is the sum divided by the filled amount, rounded half
// up to 0.01 SUN (0 when nothing was filled). A partial fill has Complete = false and
// Outstanding = the unfilled units.
func walk(levels []Level, amount int64, instantPrice Centisun) (WalkResult, int64, error) {
	w := WalkResult{Amount: amount, Fills: []Fill{}}
	left := amount
	var exact int64 // Centisun
	for _, l := range levels {
		if left == 0 {
			break
		}
		take := min(left, l.Amount)
		price := l.PriceSun
		if l.Class == ClassInstant {
			price = instantPrice
		}
		var err error
		if exact, err = addMul(exact, price, take); err != nil {
			return WalkResult{}, 0, err
		}
		w.Fills = append(w.Fills, Fill{PriceSun: price, Amount: take, Class: l.Class})
		left -= take
	}
	filled := amount - left
	w.Outstanding = left
	w.Complete = left == 0
	w.TotalSun = ceilDiv(exact, CentisunPerSun)
	if filled > 0 {
		u, err := mulDiv(exact, 1, filled, roundHalfUp)
		if err != nil {
			return WalkResult{}, 0, err
		}
		w.UnitPriceSun = Centisun(u)
	}
	return w, exact, nil
}

// ceilDiv is a/b rounded up for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return a/b + min(a%b, 1) }

func depth(levels []Level) int64 {
	var d int64
	for _, l := range levels {
		d += l.Amount
	}
	return d
}
