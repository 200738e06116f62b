package pricing

import (
	"fmt"
	"time"

	"rental/schemas/events"
	"rental/schemas/network"
)

// MinutesPerDay is the length of the day-part schedule.
const MinutesPerDay = 1440

// Model is the price model of one network, as operators keep it (infra/pricestore). The pricer
// reloads it every cycle, so a change is in force from the next snapshot on, without a deploy.
// All prices are per unit for the whole rental, in Centisun, at factor 1.00 (10,000 bps); the
// day-part factor is applied when a snapshot is built.
type Model struct {
	Network network.Network
	// Revision increases with every operator change; snapshots carry it for tracing.
	Revision int64
	// DayParts cover the UTC day without gap or overlap, in order, from minute 0 to 1440.
	DayParts []DayPart
	// Rows are the price rows of energy and bandwidth. Retired tiers never have a row.
	Rows []Row
	// ActivationPriceSun is the one-off activation price; ActivationPaused withdraws it.
	ActivationPriceSun int64
	ActivationPaused   bool
	// MarketMarkupBPS and DeepMarkupBPS are the margins added to the cost of supply bought
	// from providers and from the deep reserve (10,000 bps = 100 %).
	MarketMarkupBPS int64
	DeepMarkupBPS   int64
	// PaymentAddresses are published as the table's payment_addresses.
	PaymentAddresses map[string]string
	// ValidFor is how long a snapshot may be served: valid_until = as_of + ValidFor.
	ValidFor time.Duration
}

// DayPart is one part of the UTC day: [StartMinute, EndMinute) with a price factor.
type DayPart struct {
	ID, Label   string
	StartMinute int
	EndMinute   int
	FactorBPS   int64
}

// RowState is whether a row is sold (see events.RuleState).
type RowState = events.RuleState

const (
	stateOnSale = events.StateOnSale
	stateOff    = events.StateOff
	statePaused = events.StatePaused
)

// Row is one (resource, tier) price row.
type Row struct {
	Resource Resource
	Tier     Tier
	// BasePrice is the price per unit at factor 1.00 for orders from MinAmount.
	BasePrice Centisun
	MinAmount int64
	MaxAmount int64
	// VolumeSteps lower the instant price for larger orders: ascending MinAmount, each above
	// the row's MinAmount and at most MaxAmount, each price at most the previous one.
	VolumeSteps []VolumeStep
	// Enabled false means present but switched off (listed unavailable, 2003 on order).
	Enabled bool
	// Paused withdraws an enabled row for a while (omitted from the table, 5006 on order).
	Paused bool
	// FollowsSchedule applies the day-part factor to this row.
	FollowsSchedule bool
}

// VolumeStep is the price at factor 1.00 for orders of at least MinAmount.
type VolumeStep struct {
	MinAmount int64
	Price     Centisun
}

// State is the row's sale state. A switched-off row stays off while paused: pausing only
// withdraws a row that is on sale.
func (r Row) State() RowState {
	switch {
	case !r.Enabled:
		return stateOff
	case r.Paused:
		return statePaused
	}
	return stateOnSale
}

// Key is the row's book key.
func (r Row) Key() BookKey { return BookKey{r.Resource, r.Tier} }

// Validate checks the invariants the rest of the package relies on. The store runs it before
// saving and the pricer before using a model, so a bad edit is refused instead of published.
func (m Model) Validate() error {
	if _, err := network.Parse(string(m.Network)); err != nil {
		return err
	}
	if len(m.DayParts) == 0 {
		return fmt.Errorf("pricing: the day-part schedule is empty")
	}
	next := 0
	ids := map[string]bool{}
	for _, p := range m.DayParts {
		if p.ID == "" || ids[p.ID] {
			return fmt.Errorf("pricing: day-part id %q empty or repeated", p.ID)
		}
		ids[p.ID] = true
		if p.StartMinute != next || p.EndMinute <= p.StartMinute || p.EndMinute > MinutesPerDay {
			return fmt.Errorf("pricing: day-part %s [%d,%d) leaves a gap or overlaps (next start %d)", p.ID, p.StartMinute, p.EndMinute, next)
		}
		if p.FactorBPS <= 0 || p.FactorBPS > 10*BPSOne {
			return fmt.Errorf("pricing: day-part %s factor %d bps outside (0, 100000]", p.ID, p.FactorBPS)
		}
		next = p.EndMinute
	}
	if next != MinutesPerDay {
		return fmt.Errorf("pricing: the day-part schedule ends at minute %d, not 1440", next)
	}
	seen := map[BookKey]bool{}
	for _, r := range m.Rows {
		if r.Resource != Energy && r.Resource != Bandwidth {
			return fmt.Errorf("pricing: row %s: only energy and bandwidth have price rows", r.Key())
		}
		if TierSeconds(r.Tier) == 0 || Retired(r.Tier) {
			return fmt.Errorf("pricing: row %s: tier is unknown or retired", r.Key())
		}
		if seen[r.Key()] {
			return fmt.Errorf("pricing: row %s repeated", r.Key())
		}
		seen[r.Key()] = true
		if r.BasePrice <= 0 || r.MinAmount <= 0 || r.MaxAmount < r.MinAmount {
			return fmt.Errorf("pricing: row %s: want base price > 0 and 0 < min_amount <= max_amount", r.Key())
		}
		prevMin, prevPrice := r.MinAmount, r.BasePrice
		for _, s := range r.VolumeSteps {
			if s.MinAmount <= prevMin || s.MinAmount > r.MaxAmount {
				return fmt.Errorf("pricing: row %s: volume step at %d must ascend above %d and stay within max_amount", r.Key(), s.MinAmount, prevMin)
			}
			if s.Price <= 0 || s.Price > prevPrice {
				return fmt.Errorf("pricing: row %s: volume step at %d must not raise the price", r.Key(), s.MinAmount)
			}
			prevMin, prevPrice = s.MinAmount, s.Price
		}
	}
	if m.ActivationPriceSun < 0 || m.MarketMarkupBPS < 0 || m.DeepMarkupBPS < 0 {
		return fmt.Errorf("pricing: activation price and markups must not be negative")
	}
	if m.ValidFor <= 0 {
		return fmt.Errorf("pricing: ValidFor must be positive")
	}
	return nil
}
