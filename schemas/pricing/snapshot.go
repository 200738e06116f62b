package pricing

import (
	"fmt"
	"slices"
	"time"

	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
)

// Snapshot is everything one pricing cycle computed: the spec's PriceTable, one OrderBook per
// row on sale, and the rules behind every row (paused and switched-off rows included, which the
// table omits or marks unavailable). It is immutable once built; the edge serves it until
// ValidUntil and prices requests from it without any I/O.
type Snapshot struct {
	Network       network.Network
	AsOf          time.Time
	ValidUntil    time.Time
	ModelRevision int64
	// Table is GET /v1/prices for every resource (see FilterTable for ?resource=).
	Table PriceTable
	// Books holds one book per row on sale, without a walk.
	Books map[BookKey]OrderBook
	// Rules holds every row of the model, whatever its state.
	Rules map[BookKey]events.PriceRule
	// DeliveredToday is the energy delivered since 00:00 UTC (also in Table).
	DeliveredToday int64
}

// SnapshotSource is what the edge reads: the latest snapshot, held in memory. ok is false
// until a first snapshot has arrived. Implementations refresh in the background; Current
// never blocks on I/O.
type SnapshotSource interface {
	Current() (Snapshot, bool)
}

// Inputs are what Build needs for one cycle.
type Inputs struct {
	Model          Model
	Supply         Supply
	DeliveredToday int64
	Now            time.Time
}

// Build computes a snapshot. It fails only for an invalid model or an arithmetic overflow;
// missing supply simply yields shallow books.
func Build(in Inputs) (Snapshot, error) {
	m := in.Model
	if err := m.Validate(); err != nil {
		return Snapshot{}, err
	}
	now := in.Now.UTC().Truncate(time.Millisecond)
	s := Snapshot{
		Network:        m.Network,
		AsOf:           now,
		ValidUntil:     now.Add(m.ValidFor),
		ModelRevision:  m.Revision,
		Books:          map[BookKey]OrderBook{},
		Rules:          map[BookKey]events.PriceRule{},
		DeliveredToday: in.DeliveredToday,
	}
	cur := m.DayParts[m.PartAt(now)]
	cheaper, hasCheaper := m.CheaperFrom(now)

	rows := slices.Clone(m.Rows)
	slices.SortFunc(rows, func(a, b Row) int { return compareKeys(a.Key(), b.Key()) })

	pay := map[string]string{}
	for k, v := range m.PaymentAddresses {
		pay[k] = v
	}
	t := PriceTable{
		Network:          m.Network,
		AsOf:             events.Time(now),
		ValidUntil:       events.Time(s.ValidUntil),
		Period:           events.Period{ID: cur.ID, Label: cur.Label, Start: HHMM(cur.StartMinute), End: HHMM(cur.EndMinute)},
		DeliveredToday:   in.DeliveredToday,
		PaymentAddresses: pay,
		Items:            []PriceItem{},
	}
	if !m.ActivationPaused {
		t.Activation = &ActivationPrice{PriceSun: m.ActivationPriceSun}
	}

	for _, r := range rows {
		rule, err := ruleAt(r, cur.FactorBPS)
		if err != nil {
			return Snapshot{}, fmt.Errorf("pricing: row %s: %w", r.Key(), err)
		}
		s.Rules[r.Key()] = rule
		if rule.State == stateOnSale || rule.State == stateOff {
			item := PriceItem{
				Resource: r.Resource, Tier: r.Tier, PriceSunPerUnit: CeilSun(rule.UnitPriceSun),
				MinAmount: r.MinAmount, MaxAmount: r.MaxAmount, Available: rule.State == stateOnSale,
			}
			for _, v := range rule.VolumeTiers {
				item.VolumeTiers = append(item.VolumeTiers, events.VolumeTier{MinAmount: v.MinAmount, PriceSunPerUnit: CeilSun(v.UnitPriceSun)})
			}
			t.Items = append(t.Items, item)
		}
		if rule.State != stateOnSale {
			continue
		}
		levels, err := buildLevels(m, r.Key(), rule.UnitPriceSun, in.Supply)
		if err != nil {
			return Snapshot{}, fmt.Errorf("pricing: book %s: %w", r.Key(), err)
		}
		b := OrderBook{
			Resource: r.Resource, Tier: r.Tier, AsOf: events.Time(now), ValidUntil: events.Time(s.ValidUntil),
			Depth: depth(levels), Levels: levels,
		}
		if len(levels) > 0 {
			f := levels[0].PriceSun
			b.FloorSun = &f
		}
		if r.FollowsSchedule && hasCheaper {
			c := events.Time(cheaper)
			b.CheaperFrom = &c
		}
		s.Books[r.Key()] = b
	}
	t.AvailableEnergy = s.Books[BookKey{Energy, Tier1h}].Depth
	t.AvailableBandwidth = s.Books[BookKey{Bandwidth, Tier1h}].Depth

	// The schedule shows the 1 h energy price in every part of the day.
	energy1h, on := s.Rules[BookKey{Energy, Tier1h}]
	var base Row
	for _, r := range m.Rows {
		if r.Key() == (BookKey{Energy, Tier1h}) {
			base = r
		}
	}
	for _, p := range m.DayParts {
		e := events.DayPartPrice{ID: p.ID, Label: p.Label, StartUTCMinute: p.StartMinute, EndUTCMinute: p.EndMinute, FactorBPS: p.FactorBPS}
		if on && energy1h.State == stateOnSale {
			price := base.BasePrice
			if base.FollowsSchedule {
				var err error
				if price, err = ApplyBPS(base.BasePrice, p.FactorBPS); err != nil {
					return Snapshot{}, err
				}
			}
			e.PriceSunPerUnit = &price
		}
		t.Schedule = append(t.Schedule, e)
	}
	s.Table = t
	return s, nil
}

// ruleAt prices a row in a day-part: the list price and volume tiers with the factor applied
// (rounded half up to 0.01 SUN) when the row follows the schedule.
func ruleAt(r Row, factor int64) (events.PriceRule, error) {
	if !r.FollowsSchedule {
		factor = BPSOne
	}
	list, err := ApplyBPS(r.BasePrice, factor)
	if err != nil {
		return events.PriceRule{}, err
	}
	rule := events.PriceRule{
		Resource: r.Resource, Tier: r.Tier, State: r.State(), MinAmount: r.MinAmount, MaxAmount: r.MaxAmount,
		UnitPriceSun: list, FollowsSchedule: r.FollowsSchedule,
		VolumeTiers: []events.RuleVolumeTier{{MinAmount: r.MinAmount, UnitPriceSun: list}},
	}
	for _, v := range r.VolumeSteps {
		p, err := ApplyBPS(v.Price, factor)
		if err != nil {
			return events.PriceRule{}, err
		}
		rule.VolumeTiers = append(rule.VolumeTiers, events.RuleVolumeTier{MinAmount: v.MinAmount, UnitPriceSun: p})
	}
	return rule, nil
}

var resourceRank = map[Resource]int{Energy: 0, Bandwidth: 1, Activation: 2}

func tierRank(t Tier) int { return slices.Index(Tiers, t) }

// compareKeys orders books and rows: energy before bandwidth, then by tier duration.
func compareKeys(a, b BookKey) int {
	if a.Resource != b.Resource {
		return resourceRank[a.Resource] - resourceRank[b.Resource]
	}
	return tierRank(a.Tier) - tierRank(b.Tier)
}

// Quote is the price of an amount of a resource for a tier, from one snapshot: what
// GET /v1/estimate and POST /v1/quotes answer (without the receiver's activation fee, which
// the caller adds from ActivationPriceSun when the receiver is not activated).
type Quote struct {
	Resource Resource
	Tier     Tier // empty for activation
	Amount   int64
	// PriceSunPerUnit is the exact volume-weighted price rounded UP to whole SUN (legacy
	// clients multiply it by the amount; that product is never below the real total).
	PriceSunPerUnit int64
	// UnitPriceSun is the volume-weighted price rounded half up to 0.01 SUN.
	UnitPriceSun Centisun
	// Fills are the walk's fills, empty (not nil) when every unit has the same price.
	Fills []Fill
	// Walk is the full walk (fills always listed).
	Walk WalkResult
	// EnergyAmountSun is the total for the resource (energy or bandwidth) rounded up to whole
	// SUN; the spec's field name energy_amount_sun is used for bandwidth as well.
	EnergyAmountSun int64
	// ActivateAmountSun is the activation price for resource = activation, 0 otherwise.
	ActivateAmountSun int64
	// TotalAmountSun is EnergyAmountSun + ActivateAmountSun.
	TotalAmountSun int64
	AsOf           time.Time
	ValidUntil     time.Time
}

// Price prices amount units of resource for tier. Errors, in the order they are checked:
//   - 2001 validation_failed: resource or tier outside the enum (field resource or tier);
//   - 2003 tier_unavailable: a retired tier, a tier without a row, or a switched-off row
//     (details.available_tiers: the tiers on sale for the resource, possibly empty);
//   - 5006 supply_paused: the row is paused;
//   - 2008 amount_out_of_range: amount outside [min_amount, max_amount] (field amount,
//     details.min_amount, details.max_amount);
//   - 5001 insufficient_supply: the book cannot fill the amount (details.available).
//
// For resource = activation, tier and amount are ignored and the quote carries the
// activation price (5006 while activation is paused).
func (s Snapshot) Price(resource Resource, tier Tier, amount int64) (Quote, error) {
	if resource == Activation {
		p, err := s.ActivationPriceSun()
		if err != nil {
			return Quote{}, err
		}
		return Quote{Resource: Activation, ActivateAmountSun: p, TotalAmountSun: p, Fills: []Fill{},
			Walk: WalkResult{Fills: []Fill{}, Complete: true}, AsOf: s.AsOf, ValidUntil: s.ValidUntil}, nil
	}
	rule, err := s.sellable(resource, tier)
	if err != nil {
		return Quote{}, err
	}
	if err := checkAmount(rule, amount); err != nil {
		return Quote{}, err
	}
	book := s.Books[BookKey{resource, tier}]
	w, exact, err := walk(book.Levels, amount, instantPrice(rule, amount))
	if err != nil {
		return Quote{}, apierr.InternalError.Wrap(err, "pricing overflow")
	}
	if !w.Complete {
		return Quote{}, apierr.InsufficientSupply.Newf("%d of %d units available for %s %s", book.Depth, amount, resource, tier).
			With("available", book.Depth)
	}
	perUnit, err := mulDiv(exact, 1, amount*CentisunPerSun, roundUp)
	if err != nil {
		return Quote{}, apierr.InternalError.Wrap(err, "pricing overflow")
	}
	q := Quote{
		Resource: resource, Tier: tier, Amount: amount,
		PriceSunPerUnit: perUnit, UnitPriceSun: w.UnitPriceSun, Walk: w, Fills: w.Fills,
		EnergyAmountSun: w.TotalSun, TotalAmountSun: w.TotalSun, AsOf: s.AsOf, ValidUntil: s.ValidUntil,
	}
	if uniform(w.Fills) {
		q.Fills = []Fill{}
	}
	return q, nil
}

// ActivationPriceSun is the activation price, or 5006 while activation sales are paused.
func (s Snapshot) ActivationPriceSun() (int64, error) {
	if s.Table.Activation == nil {
		return 0, apierr.SupplyPaused.New("activation sales are paused").WithField("resource")
	}
	return s.Table.Activation.PriceSun, nil
}

// OrderBook returns the book of (resource, tier) with the walk of amount attached when
// amount > 0 (a partial walk is not an error here: the book shows complete = false and the
// outstanding units). Errors as for Price, except that 5001 is never returned; activation
// has no book (2001 on field resource).
func (s Snapshot) OrderBook(resource Resource, tier Tier, amount int64) (OrderBook, error) {
	if resource == Activation {
		return OrderBook{}, apierr.ValidationFailed.New("activation has no order book").WithField("resource").
			With("constraint", "one of energy, bandwidth")
	}
	rule, err := s.sellable(resource, tier)
	if err != nil {
		return OrderBook{}, err
	}
	b := s.Books[BookKey{resource, tier}]
	b.Levels = slices.Clone(b.Levels)
	if b.Levels == nil {
		b.Levels = []Level{}
	}
	if amount == 0 {
		return b, nil
	}
	if err := checkAmount(rule, amount); err != nil {
		return OrderBook{}, err
	}
	w, _, err := walk(b.Levels, amount, instantPrice(rule, amount))
	if err != nil {
		return OrderBook{}, apierr.InternalError.Wrap(err, "pricing overflow")
	}
	b.Walk = &w
	return b, nil
}

// sellable returns the rule of a row on sale or the catalogue error saying why it is not.
func (s Snapshot) sellable(resource Resource, tier Tier) (events.PriceRule, error) {
	if _, err := ParseResource(string(resource)); err != nil {
		return events.PriceRule{}, err
	}
	if _, err := ParseTier(string(tier)); err != nil {
		return events.PriceRule{}, err
	}
	rule, ok := s.Rules[BookKey{resource, tier}]
	if !ok || Retired(tier) || rule.State == stateOff {
		return events.PriceRule{}, apierr.TierUnavailable.Newf("tier %s is not on sale for %s", tier, resource).
			WithField("tier").With("available_tiers", s.AvailableTiers(resource))
	}
	if rule.State == statePaused {
		return events.PriceRule{}, apierr.SupplyPaused.Newf("sales of %s %s are paused", resource, tier).WithField("tier")
	}
	return rule, nil
}

// AvailableTiers lists the tiers on sale for resource, shortest first (never nil).
func (s Snapshot) AvailableTiers(resource Resource) []Tier {
	out := []Tier{}
	for _, t := range Tiers {
		if r, ok := s.Rules[BookKey{resource, t}]; ok && r.State == stateOnSale && !Retired(t) {
			out = append(out, t)
		}
	}
	return out
}

func checkAmount(rule events.PriceRule, amount int64) error {
	if amount < rule.MinAmount || amount > rule.MaxAmount {
		return apierr.AmountOutOfRange.Newf("amount %d outside [%d, %d] for %s %s", amount, rule.MinAmount, rule.MaxAmount, rule.Resource, rule.Tier).
			WithField("amount").With("min_amount", rule.MinAmount).With("max_amount", rule.MaxAmount)
	}
	return nil
}

// instantPrice is the volume-tier price for an order of amount: the tier with the largest
// MinAmount not above amount (the first tier starts at the row minimum).
func instantPrice(rule events.PriceRule, amount int64) Centisun {
	p := rule.UnitPriceSun
	for _, v := range rule.VolumeTiers {
		if v.MinAmount <= amount {
			p = v.UnitPriceSun
		}
	}
	return p
}

func uniform(fills []Fill) bool {
	for _, f := range fills[min(1, len(fills)):] {
		if f.PriceSun != fills[0].PriceSun {
			return false
		}
	}
	return true
}

// FilterTable is the table for GET /v1/prices?resource=: items of that resource only; for
// activation no items (the activation object carries its price).
func FilterTable(t PriceTable, resource Resource) PriceTable {
	items := []PriceItem{}
	for _, it := range t.Items {
		if it.Resource == resource {
			items = append(items, it)
		}
	}
	t.Items = items
	return t
}

// Record is the snapshot as published on topics.MarketData and cached for the edge.
func (s Snapshot) Record() events.MarketData {
	md := events.MarketData{
		Version: events.MarketDataVersion, Network: s.Network, AsOf: events.Time(s.AsOf), ValidUntil: events.Time(s.ValidUntil),
		ModelRevision: s.ModelRevision, Prices: s.Table, Books: []OrderBook{}, Rules: []events.PriceRule{},
	}
	keys := make([]BookKey, 0, len(s.Rules))
	for k := range s.Rules {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKeys)
	for _, k := range keys {
		md.Rules = append(md.Rules, s.Rules[k])
		if b, ok := s.Books[k]; ok {
			if b.Levels == nil {
				b.Levels = []Level{}
			}
			md.Books = append(md.Books, b)
		}
	}
	return md
}

// FromRecord rebuilds a snapshot from its published record (what the edge's cache does).
func FromRecord(md events.MarketData) (Snapshot, error) {
	if md.Version != events.MarketDataVersion {
		return Snapshot{}, fmt.Errorf("pricing: market data version %d, want %d", md.Version, events.MarketDataVersion)
	}
	if _, err := network.Parse(string(md.Network)); err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{
		Network: md.Network, AsOf: time.Time(md.AsOf).UTC(), ValidUntil: time.Time(md.ValidUntil).UTC(),
		ModelRevision: md.ModelRevision, Table: md.Prices, DeliveredToday: md.Prices.DeliveredToday,
		Books: map[BookKey]OrderBook{}, Rules: map[BookKey]events.PriceRule{},
	}
	for _, r := range md.Rules {
		if len(r.VolumeTiers) == 0 || r.VolumeTiers[0].MinAmount != r.MinAmount {
			return Snapshot{}, fmt.Errorf("pricing: rule %s:%s has no base volume tier", r.Resource, r.Tier)
		}
		s.Rules[BookKey{r.Resource, r.Tier}] = r
	}
	for _, b := range md.Books {
		k := BookKey{b.Resource, b.Tier}
		if r, ok := s.Rules[k]; !ok || r.State != stateOnSale {
			return Snapshot{}, fmt.Errorf("pricing: book %s without a rule on sale", k)
		}
		s.Books[k] = b
	}
	return s, nil
}
