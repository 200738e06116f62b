package edge

// Subscription endpoints (rental-api-v1 "Subscriptions", "Subscription", "Subscription
// status"; docs/subscriptions.md):
//
//	GET    /v1/subscriptions/plans   public (a presented key is verified): presets, per-use price, limits
//	GET    /v1/subscriptions         key subscriptions.read or session: the account's, newest first
//	POST   /v1/subscriptions         key subscriptions.write or session: plan or legacy body
//	GET    /v1/subscriptions/{id}    the record; a plan subscription with its last 20 events
//	PATCH  /v1/subscriptions/{id}    status (active, paused), rule, refill parameters, label
//	DELETE /v1/subscriptions/{id}    cancel (terminal, the record stays readable)
//
// Creation of a plan subscription charges the first day's fee in the same transaction as
// the row, its history and subscription.charged, so a refused charge (4001) stores nothing
// and a subscription never exists unpaid. The watcher (processors/subscriptions) does the
// rest: refills, daily billing, suspension and resumption.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/substore"
	"rental/schemas/apierr"
	"rental/schemas/autorefill"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// Page sizes of GET /v1/subscriptions?limit=.
const (
	DefaultSubscriptionsPageSize = 50
	MaxSubscriptionsPageSize     = substore.MaxListLimit
	// MaxLabelLen is the longest subscription label.
	MaxLabelLen = 100
)

// SubscriptionsOptions are the subscription module's dependencies.
type SubscriptionsOptions struct {
	Network     network.Network     // required
	Ledger      *ledgerstore.Ledger // required: the fee charge; its pool runs the transactions
	Idempotency *idempotency.Store  // required: Idempotency-Key on POST and PATCH
	// Pricing gives the live snapshot: the per-use price of the plans and the amount range
	// of a legacy refill. nil shows the per-use price as null and skips the range check
	// (the refill order is still checked when the watcher places it).
	Pricing *Pricing
	// Available is the SUBSCRIPTIONS_AVAILABLE switch, read on every request; nil means
	// always available. While it is false, creating and changing rules answer 3021.
	Available func() bool
	Logger    *slog.Logger     // default: discard
	Now       func() time.Time // default time.Now
}

// Subscriptions is the module serving the subscription endpoints.
type Subscriptions struct {
	o             SubscriptionsOptions
	log           *slog.Logger
	create, patch HandlerFunc
}

// NewSubscriptions checks the options.
func NewSubscriptions(o SubscriptionsOptions) (*Subscriptions, error) {
	if o.Ledger == nil || o.Idempotency == nil {
		return nil, errors.New("edge: subscriptions: Ledger and Idempotency are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, errors.New("edge: subscriptions: " + err.Error())
	}
	if o.Available == nil {
		o.Available = func() bool { return true }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m := &Subscriptions{o: o, log: o.Logger.With("module", "subscriptions")}
	m.create = idempotentOn(o.Idempotency, m.createSubscription)
	m.patch = idempotentOn(o.Idempotency, m.updateSubscription)
	return m, nil
}

// Handlers implements Module.
func (m *Subscriptions) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{
		"GET /v1/subscriptions/plans":               m.getPlans,
		"GET /v1/subscriptions":                     m.listSubscriptions,
		"POST /v1/subscriptions":                    m.create,
		"GET /v1/subscriptions/{subscriptionId}":    m.getSubscription,
		"PATCH /v1/subscriptions/{subscriptionId}":  m.patch,
		"DELETE /v1/subscriptions/{subscriptionId}": m.deleteSubscription,
	}
}

func (m *Subscriptions) now() time.Time { return m.o.Now().UTC().Truncate(time.Millisecond) }

// ---- GET /v1/subscriptions/plans ----

type planList struct {
	Available bool         `json:"available"`
	Data      []planRecord `json:"data"`
	PerUse    perUse       `json:"per_use"`
	Limits    planLimits   `json:"limits"`
	FeeRule   feeRule      `json:"fee_rule"`
	At        events.Time  `json:"at"`
}

type planRecord struct {
	Slug                    string         `json:"slug"`
	Name                    string         `json:"name"`
	Reserve                 int64          `json:"reserve"`
	Low                     int64          `json:"low"`
	High                    int64          `json:"high"`
	FeeSunPerDay            int64          `json:"fee_sun_per_day"`
	FeeTRXPerDay            float64        `json:"fee_trx_per_day"`
	ThroughputRule          string         `json:"throughput_rule"`
	UsesWithinReservePerDay int64          `json:"uses_within_reserve_per_day"`
	AveragePrice            []averagePrice `json:"average_price"`
}

type averagePrice struct {
	UsesPerDay    int64    `json:"uses_per_day"`
	AverageSun    *int64   `json:"average_sun"`
	AverageTRX    *float64 `json:"average_trx"`
	WithinReserve bool     `json:"within_reserve"`
}

type perUse struct {
	Mode         string   `json:"mode"`
	EnergyPerUse int64    `json:"energy_per_use"`
	PriceSun     *int64   `json:"price_sun"`
	PriceTRX     *float64 `json:"price_trx"`
	DayPart      *string  `json:"day_part"`
}

type planLimits struct {
	ReserveMin int64 `json:"reserve_min"`
	ReserveMax int64 `json:"reserve_max"`
	Step       int64 `json:"step"`
	LowMin     int64 `json:"low_min"`
	GapMin     int64 `json:"gap_min"`
}

type feeRule struct {
	TRXPerUnit int64  `json:"trx_per_unit"`
	UnitEnergy int64  `json:"unit_energy"`
	Rounding   string `json:"rounding"`
}

// averageUses are the uses per day average_price is computed for.
var averageUses = []int64{10, 50, 200, 1_000}

func sunToTRX(sun int64) float64 { return float64(sun) / float64(autorefill.SunPerTRX) }

// perUsePrice is one use (65,000 energy) at the 1 h energy price of the current day-part
// in the live snapshot; nil while 1 h energy is not on sale or no fresh snapshot exists.
func (m *Subscriptions) perUsePrice() perUse {
	pu := perUse{Mode: "grid", EnergyPerUse: autorefill.EnergyPerUse}
	if m.o.Pricing == nil {
		return pu
	}
	s, err := m.o.Pricing.snapshot()
	if err != nil {
		return pu
	}
	part := s.Table.Period.ID
	pu.DayPart = &part
	rule, ok := s.Rules[pricing.BookKey{Resource: pricing.Energy, Tier: pricing.Tier1h}]
	if !ok || rule.State != events.StateOnSale {
		return pu
	}
	// Centisun x 65,000 / 100: exact in whole SUN (65,000 is a multiple of 100).
	sun := int64(rule.UnitPriceSun) * autorefill.EnergyPerUse / 100
	trx := sunToTRX(sun)
	pu.PriceSun, pu.PriceTRX = &sun, &trx
	return pu
}

func (m *Subscriptions) getPlans(_ context.Context, rc *fasthttp.RequestCtx) error {
	pu := m.perUsePrice()
	out := planList{
		Available: m.o.Available(),
		PerUse:    pu,
		Limits: planLimits{ReserveMin: autorefill.ReserveMin, ReserveMax: autorefill.ReserveMax, Step: autorefill.Step,
			LowMin: autorefill.LowMin, GapMin: autorefill.GapMin},
		FeeRule: feeRule{TRXPerUnit: autorefill.FeeTRXPerUnit, UnitEnergy: autorefill.FeeUnitEnergy, Rounding: "ceil_whole_trx"},
		At:      events.Time(m.now()),
	}
	for _, p := range autorefill.Presets {
		fee := autorefill.DailyFeeSun(p.Rule.Reserve)
		within := autorefill.UsesWithinReservePerDay(p.Rule.Reserve)
		r := planRecord{Slug: p.Slug, Name: p.Name, Reserve: p.Rule.Reserve, Low: p.Rule.Low, High: p.Rule.High,
			FeeSunPerDay: fee, FeeTRXPerDay: sunToTRX(fee), UsesWithinReservePerDay: within,
			ThroughputRule: fmt.Sprintf("up to %d energy delegated at once; each top-up is a 1 h rental, so the reserve renews every hour (%d uses of %d energy per day)",
				p.Rule.Reserve, within, autorefill.EnergyPerUse)}
		for _, n := range averageUses {
			a := averagePrice{UsesPerDay: n, WithinReserve: n <= within}
			if pu.PriceSun != nil {
				sun := (fee+n-1)/n + *pu.PriceSun
				trx := sunToTRX(sun)
				a.AverageSun, a.AverageTRX = &sun, &trx
			}
			r.AveragePrice = append(r.AveragePrice, a)
		}
		out.Data = append(out.Data, r)
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}

// ---- POST /v1/subscriptions ----

// subscriptionBody holds both body forms; pointers tell absent (or null) from zero.
type subscriptionBody struct {
	// plan form
	Address *string `json:"address"`
	Preset  *string `json:"preset"`
	Reserve *int64  `json:"reserve"`
	Low     *int64  `json:"low"`
	High    *int64  `json:"high"`
	// legacy form
	Receiver         *string `json:"receiver"`
	Resource         *string `json:"resource"`
	Mode             *string `json:"mode"`
	Tier             *string `json:"tier"`
	ThresholdAmount  *int64  `json:"threshold_amount"`
	RefillAmount     *int64  `json:"refill_amount"`
	MaxPriceSun      *int64  `json:"max_price_sun"`
	MaxRefillsPerDay *int    `json:"max_refills_per_day"`
	// both
	Label *string `json:"label"`
}

func (b subscriptionBody) planFields() []string {
	var f []string
	for name, set := range map[string]bool{"address": b.Address != nil, "preset": b.Preset != nil, "reserve": b.Reserve != nil,
		"low": b.Low != nil, "high": b.High != nil} {
		if set {
			f = append(f, name)
		}
	}
	slices.Sort(f)
	return f
}

func (b subscriptionBody) legacyFields() []string {
	var f []string
	for name, set := range map[string]bool{"receiver": b.Receiver != nil, "resource": b.Resource != nil, "mode": b.Mode != nil,
		"tier": b.Tier != nil, "threshold_amount": b.ThresholdAmount != nil, "refill_amount": b.RefillAmount != nil,
		"max_price_sun": b.MaxPriceSun != nil, "max_refills_per_day": b.MaxRefillsPerDay != nil} {
		if set {
			f = append(f, name)
		}
	}
	slices.Sort(f)
	return f
}

// parseAddressField is parseReceiver naming the field the address came in.
func parseAddressField(field, v string) (string, error) {
	a, err := parseReceiver(v)
	if err != nil {
		var e *apierr.Error
		if errors.As(err, &e) {
			return "", apierr.InvalidAddress.New(strings.Replace(e.Message, "receiver", field, 1)).WithField(field)
		}
		return "", err
	}
	return a.String(), nil
}

func parseLabel(v *string) (*string, error) {
	if v == nil {
		return nil, nil
	}
	if len(*v) > MaxLabelLen {
		return nil, Invalid("label", "max_length", fmt.Sprintf("label must be at most %d characters", MaxLabelLen)).With("max_length", MaxLabelLen)
	}
	s := *v
	return &s, nil
}

// soldTiers are the tiers a legacy rule may use: the tiers sold at all (rental-api-v1
// "Tiers"). Whether a tier is on sale right now is checked when a refill is placed.
var soldTiers = []string{string(pricing.Tier5m), string(pricing.Tier1h)}

func parseSubscriptionTier(v string) (string, error) {
	if _, err := parseTier(v); err != nil {
		return "", err
	}
	if !slices.Contains(soldTiers, v) {
		return "", apierr.TierUnavailable.New("tier "+v+" is not sold; a subscription refills with a tier on sale").
			WithField("tier").With("available_tiers", soldTiers)
	}
	return v, nil
}

// checkRefillAmount refuses a legacy refill_amount outside the live row's range (2008),
// when a fresh snapshot exists to tell.
func (m *Subscriptions) checkRefillAmount(resource, tier string, amount int64) error {
	if amount < 1 {
		return Invalid("refill_amount", "min", "refill_amount must be at least 1").With("min", 1)
	}
	if m.o.Pricing == nil {
		return nil
	}
	s, err := m.o.Pricing.snapshot()
	if err != nil {
		return nil // no fresh prices: the watcher's placement checks the range
	}
	rule, ok := s.Rules[pricing.BookKey{Resource: pricing.Resource(resource), Tier: pricing.Tier(tier)}]
	if ok && (amount < rule.MinAmount || amount > rule.MaxAmount) {
		return apierr.AmountOutOfRange.Newf("refill_amount must be from %d to %d for %s %s", rule.MinAmount, rule.MaxAmount, resource, tier).
			WithField("refill_amount").With("min_amount", rule.MinAmount).With("max_amount", rule.MaxAmount)
	}
	return nil
}

func checkThreshold(v int64) error {
	if v < 0 {
		return Invalid("threshold_amount", "min", "threshold_amount must not be negative").With("min", 0)
	}
	return nil
}

func checkMaxPrice(v *int64) error {
	if v != nil && *v < 0 {
		return Invalid("max_price_sun", "min", "max_price_sun must not be negative").With("min", 0)
	}
	return nil
}

func checkMaxRefills(v *int) error {
	if v != nil && *v < 1 {
		return Invalid("max_refills_per_day", "min", "max_refills_per_day must be at least 1 (null for no limit)").With("min", 1)
	}
	return nil
}

// ruleInvalid is 3020 with every violation listed.
func ruleInvalid(vs []autorefill.Violation) error {
	return apierr.SubscriptionRuleInvalid.Newf("the rule is outside the plan limits (%d violations)", len(vs)).With("violations", vs)
}

func unavailable() error {
	return apierr.SubscriptionsUnavailable.New("subscriptions are switched off on this deployment for creating or changing rules; reads, status and label changes and DELETE still work")
}

// planRule reads the plan form's rule: a preset, or the three numbers.
func planRule(preset *string, reserve, low, high *int64) (autorefill.Rule, error) {
	if preset != nil {
		if reserve != nil || low != nil || high != nil {
			return autorefill.Rule{}, Invalid("preset", "exclusive", "send either preset or reserve, low and high, not both")
		}
		p, ok := autorefill.PresetBySlug(*preset)
		if !ok {
			return autorefill.Rule{}, Invalid("preset", "enum", "unknown preset "+quote(*preset)).With("allowed", autorefill.PresetSlugs())
		}
		return p.Rule, nil
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"reserve", reserve}, {"low", low}, {"high", high}} {
		if f.v == nil {
			return autorefill.Rule{}, Invalid(f.name, "required", "a plan subscription needs preset, or reserve, low and high")
		}
	}
	return autorefill.Rule{Reserve: *reserve, Low: *low, High: *high}, nil
}

func (m *Subscriptions) createSubscription(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
	p, err := accountOf(rc)
	if err != nil {
		return TxResult{}, err
	}
	var b subscriptionBody
	if err := DecodeJSON(rc, &b); err != nil {
		return TxResult{}, err
	}
	plan, legacy := b.planFields(), b.legacyFields()
	switch {
	case len(plan) > 0 && len(legacy) > 0:
		return TxResult{}, Invalid(legacy[0], "mixed_forms", "the body mixes the plan form ("+strings.Join(plan, ", ")+
			") with the legacy form ("+strings.Join(legacy, ", ")+"); send one").With("plan_fields", plan).With("legacy_fields", legacy)
	case len(plan) == 0 && len(legacy) == 0:
		return TxResult{}, Invalid("address", "required", "send {address, preset}, {address, reserve, low, high} or the legacy body")
	}
	if !m.o.Available() {
		return TxResult{}, unavailable()
	}
	label, err := parseLabel(b.Label)
	if err != nil {
		return TxResult{}, err
	}
	now := m.now()
	s := substore.Row{ID: substore.NewID(), AccountID: p.AccountID, Network: m.o.Network, Label: label, CreatedAt: now}
	if len(plan) > 0 {
		if b.Address == nil {
			return TxResult{}, Invalid("address", "required", "address is required")
		}
		if s.Receiver, err = parseAddressField("address", *b.Address); err != nil {
			return TxResult{}, err
		}
		rule, err := planRule(b.Preset, b.Reserve, b.Low, b.High)
		if err != nil {
			return TxResult{}, err
		}
		if vs := rule.Validate(); len(vs) > 0 {
			return TxResult{}, ruleInvalid(vs)
		}
		s.Kind, s.Resource, s.Mode, s.Tier = autorefill.Plan, string(pricing.Energy), autorefill.Refill, string(pricing.Tier1h)
		s.ThresholdAmount, s.RefillAmount = rule.Low, autorefill.SmallestTopUp(rule)
		s.Reserve, s.Low, s.High = &rule.Reserve, &rule.Low, &rule.High
		s.Preset = autorefill.PresetOf(rule)
		s.DailyFeeSun = autorefill.DailyFeeSun(rule.Reserve)
	} else {
		if err := m.parseLegacy(b, &s); err != nil {
			return TxResult{}, err
		}
	}
	row, existing, err := substore.Insert(ctx, tx, s)
	if err != nil {
		return TxResult{}, err
	}
	if existing != "" {
		field := "receiver"
		if s.Kind == autorefill.Plan {
			field = "address"
		}
		return TxResult{}, apierr.SubscriptionExists.New("this address already has a "+s.Resource+" subscription on this account").
			WithField(field).With("subscription_id", existing)
	}
	if row.Kind == autorefill.Plan {
		// The first day is charged at the start, in this transaction: a refusal (4001,
		// 4002) rolls the row back with it.
		if err := substore.ChargeFee(ctx, tx, m.o.Ledger, &row, now, now); err != nil {
			return TxResult{}, err
		}
	}
	row.NextCheckAt = &now // the watcher looks at it at once
	if err := substore.Save(ctx, tx, row, now); err != nil {
		return TxResult{}, err
	}
	row.UpdatedAt = now
	return TxResult{Status: fasthttp.StatusCreated, Body: row.Record(0, nil), ObjectID: row.ID}, nil
}

func (m *Subscriptions) parseLegacy(b subscriptionBody, s *substore.Row) error {
	var err error
	if b.Receiver == nil {
		return Invalid("receiver", "required", "receiver is required")
	}
	if s.Receiver, err = parseAddressField("receiver", *b.Receiver); err != nil {
		return err
	}
	if b.Resource == nil {
		return Invalid("resource", "required", "resource is required")
	}
	if *b.Resource != string(pricing.Energy) && *b.Resource != string(pricing.Bandwidth) {
		return Invalid("resource", "enum", "resource must be energy or bandwidth").With("allowed", []string{"energy", "bandwidth"})
	}
	s.Resource = *b.Resource
	if b.Mode == nil {
		return Invalid("mode", "required", "mode is required")
	}
	if *b.Mode != string(autorefill.Refill) && *b.Mode != string(autorefill.Renewal) {
		return Invalid("mode", "enum", "mode must be refill or renewal").With("allowed", []string{"refill", "renewal"})
	}
	s.Mode = autorefill.Mode(*b.Mode)
	if b.Tier == nil {
		return Invalid("tier", "required", "tier is required")
	}
	if s.Tier, err = parseSubscriptionTier(*b.Tier); err != nil {
		return err
	}
	if b.ThresholdAmount == nil {
		return Invalid("threshold_amount", "required", "threshold_amount is required")
	}
	if err := checkThreshold(*b.ThresholdAmount); err != nil {
		return err
	}
	if b.RefillAmount == nil {
		return Invalid("refill_amount", "required", "refill_amount is required")
	}
	if err := m.checkRefillAmount(s.Resource, s.Tier, *b.RefillAmount); err != nil {
		return err
	}
	if err := checkMaxPrice(b.MaxPriceSun); err != nil {
		return err
	}
	if err := checkMaxRefills(b.MaxRefillsPerDay); err != nil {
		return err
	}
	s.Kind, s.ThresholdAmount, s.RefillAmount = autorefill.Legacy, *b.ThresholdAmount, *b.RefillAmount
	s.MaxPriceSun, s.MaxRefillsPerDay = b.MaxPriceSun, b.MaxRefillsPerDay
	return nil
}

// ---- GET /v1/subscriptions/{id} ----

var subscriptionIDPattern = regexp.MustCompile(`^` + substore.IDPrefix + `_[0-9a-f]{24}$`)

// subscriptionNotFound answers an unknown id and another account's subscription alike:
// 404 3022 object_not_found on the path parameter (docs/errors.md).
func subscriptionNotFound(id string) error {
	return apierr.ObjectNotFound.New("no subscription " + quote(id) + " on this account").WithField("subscriptionId")
}

func (m *Subscriptions) getSubscription(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := accountOf(rc)
	if err != nil {
		return err
	}
	id := pathValue(rc, "subscriptionId")
	if !subscriptionIDPattern.MatchString(id) {
		return subscriptionNotFound(id)
	}
	pool := m.o.Ledger.Pool()
	row, err := substore.Get(ctx, pool, p.AccountID, id)
	if errors.Is(err, substore.ErrNotFound) {
		return subscriptionNotFound(id)
	}
	if err != nil {
		return err
	}
	rec, err := m.render(ctx, pool, row, true)
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, rec)
}

// render is the record with a plan's delegated energy and, withHistory, its events[].
func (m *Subscriptions) render(ctx context.Context, q substore.Querier, row substore.Row, withHistory bool) (autorefill.Record, error) {
	if row.Kind != autorefill.Plan {
		return row.Record(0, nil), nil
	}
	delegated, err := substore.DelegatedEnergy(ctx, q, row.ID, m.o.Now())
	if err != nil {
		return autorefill.Record{}, err
	}
	var hist []autorefill.HistoryEvent
	if withHistory {
		if hist, err = substore.RecentHistory(ctx, q, row.ID, autorefill.MaxHistory); err != nil {
			return autorefill.Record{}, err
		}
	}
	return row.Record(delegated, hist), nil
}

// ---- GET /v1/subscriptions ----

type subscriptionList struct {
	Data       []autorefill.Record `json:"data"`
	NextCursor *string             `json:"next_cursor"`
}

// subscriptionCursor pages GET /v1/subscriptions.
var subscriptionCursor = listCursor{prefix: "s1:", id: subscriptionIDPattern}

func (m *Subscriptions) listSubscriptions(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := accountOf(rc)
	if err != nil {
		return err
	}
	q, err := readQuery(rc, "limit", "cursor", "status", "receiver")
	if err != nil {
		return err
	}
	limit, err := pageLimit(q, DefaultSubscriptionsPageSize, MaxSubscriptionsPageSize)
	if err != nil {
		return err
	}
	var f substore.Filter
	if v, ok := q["cursor"]; ok {
		pos, err := subscriptionCursor.decode(v)
		if err != nil {
			return err
		}
		f.After = &pos
	}
	if v, ok := q["status"]; ok {
		for _, s := range strings.Split(v, ",") {
			st, ok := autorefill.ParseStatus(s)
			if !ok {
				return Invalid("status", "enum", "status must be active, paused, suspended or cancelled (comma separated for several)").
					With("allowed", autorefill.Statuses)
			}
			if !slices.Contains(f.Statuses, st) {
				f.Statuses = append(f.Statuses, st)
			}
		}
	}
	if v, ok := q["receiver"]; ok {
		a, err := parseReceiver(v)
		if err != nil {
			return Invalid("receiver", "format", "receiver must be a Base58Check TRON address")
		}
		f.Receiver = a.String()
	}
	pool := m.o.Ledger.Pool()
	rows, next, err := substore.List(ctx, pool, p.AccountID, f, limit)
	if err != nil {
		return err
	}
	var planIDs []string
	for _, r := range rows {
		if r.Kind == autorefill.Plan {
			planIDs = append(planIDs, r.ID)
		}
	}
	delegated, err := substore.DelegatedEnergyOf(ctx, pool, planIDs, m.o.Now())
	if err != nil {
		return err
	}
	out := subscriptionList{Data: make([]autorefill.Record, len(rows))}
	for i, r := range rows {
		out.Data[i] = r.Record(delegated[r.ID], nil)
	}
	if next != nil {
		c := subscriptionCursor.encode(*next)
		out.NextCursor = &c
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}

// ---- PATCH /v1/subscriptions/{id} ----

var (
	legacyPatchFields = []string{"status", "tier", "threshold_amount", "refill_amount", "max_price_sun", "max_refills_per_day", "label"}
	planPatchFields   = []string{"status", "reserve", "low", "high", "preset", "label"}
)

// decodeField reads one PATCH value into dst, answering 2001 type for a wrong JSON type.
func decodeField(name string, raw json.RawMessage, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(dst); err != nil {
		e := decodeError(err)
		var ae *apierr.Error
		if errors.As(e, &ae) {
			ae.Field = name
		}
		return e
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func (m *Subscriptions) updateSubscription(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error) {
	p, err := accountOf(rc)
	if err != nil {
		return TxResult{}, err
	}
	id := pathValue(rc, "subscriptionId")
	if !subscriptionIDPattern.MatchString(id) {
		return TxResult{}, subscriptionNotFound(id)
	}
	var body map[string]json.RawMessage
	if err := DecodeJSON(rc, &body); err != nil {
		return TxResult{}, err
	}
	if len(body) == 0 {
		return TxResult{}, apierr.EmptyPatch.New("the PATCH body names no field to change")
	}
	row, err := substore.Lock(ctx, tx, p.AccountID, id)
	if errors.Is(err, substore.ErrNotFound) {
		return TxResult{}, subscriptionNotFound(id)
	}
	if err != nil {
		return TxResult{}, err
	}
	allowed, other := legacyPatchFields, planPatchFields
	if row.Kind == autorefill.Plan {
		allowed, other = planPatchFields, legacyPatchFields
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range body {
			if !yield(k) {
				return
			}
		}
	})
	ruleChange := false
	for _, k := range names {
		switch {
		case slices.Contains(allowed, k):
			if k != "status" && k != "label" {
				ruleChange = true
			}
		case slices.Contains(other, k):
			return TxResult{}, Invalid(k, "form", k+" does not apply to a "+string(row.Kind)+" subscription").With("allowed", allowed)
		default:
			return TxResult{}, Invalid(k, "unknown_field", "unknown field "+k).With("allowed", allowed)
		}
	}
	if row.Status == autorefill.Cancelled {
		return TxResult{}, apierr.SubscriptionNotActive.New("the subscription is cancelled; it can no longer change").With("status", string(row.Status))
	}
	if ruleChange && !m.o.Available() {
		return TxResult{}, unavailable()
	}
	now := m.now()
	if err := m.applyPatch(body, &row); err != nil {
		return TxResult{}, err
	}
	if raw, ok := body["status"]; ok {
		var st string
		if err := decodeField("status", raw, &st); err != nil {
			return TxResult{}, err
		}
		if err := m.changeStatus(ctx, tx, &row, st, now); err != nil {
			return TxResult{}, err
		}
	}
	if ruleChange || body["status"] != nil {
		row.NextCheckAt = &now // the watcher looks again at once
		if row.Status == autorefill.Cancelled {
			row.NextCheckAt = nil
		}
	}
	if err := substore.Save(ctx, tx, row, now); err != nil {
		return TxResult{}, err
	}
	row.UpdatedAt = now
	rec, err := m.render(ctx, tx, row, false)
	if err != nil {
		return TxResult{}, err
	}
	return TxResult{Status: fasthttp.StatusOK, Body: rec, ObjectID: row.ID}, nil
}

// applyPatch applies the rule, refill parameter and label fields of body to row.
func (m *Subscriptions) applyPatch(body map[string]json.RawMessage, row *substore.Row) error {
	if raw, ok := body["label"]; ok {
		if isNull(raw) {
			row.Label = nil
		} else {
			var s string
			if err := decodeField("label", raw, &s); err != nil {
				return err
			}
			l, err := parseLabel(&s)
			if err != nil {
				return err
			}
			row.Label = l
		}
	}
	if row.Kind == autorefill.Plan {
		return m.applyPlanPatch(body, row)
	}
	if raw, ok := body["tier"]; ok {
		var s string
		if err := decodeField("tier", raw, &s); err != nil {
			return err
		}
		t, err := parseSubscriptionTier(s)
		if err != nil {
			return err
		}
		row.Tier = t
	}
	if v, ok, err := patchInt(body, "threshold_amount"); err != nil {
		return err
	} else if ok {
		if err := checkThreshold(v); err != nil {
			return err
		}
		row.ThresholdAmount = v
	}
	if v, ok, err := patchInt(body, "refill_amount"); err != nil {
		return err
	} else if ok {
		row.RefillAmount = v
	}
	if _, ok := body["refill_amount"]; ok || body["tier"] != nil {
		if err := m.checkRefillAmount(row.Resource, row.Tier, row.RefillAmount); err != nil {
			return err
		}
	}
	if raw, ok := body["max_price_sun"]; ok {
		var v *int64
		if err := decodeField("max_price_sun", raw, &v); err != nil {
			return err
		}
		if err := checkMaxPrice(v); err != nil {
			return err
		}
		row.MaxPriceSun = v
	}
	if raw, ok := body["max_refills_per_day"]; ok {
		var v *int
		if err := decodeField("max_refills_per_day", raw, &v); err != nil {
			return err
		}
		if err := checkMaxRefills(v); err != nil {
			return err
		}
		row.MaxRefillsPerDay = v
	}
	return nil
}

// patchInt reads an integer field of a PATCH body: ok when it is present, and a null is
// 2001 required (the field cannot be cleared).
func patchInt(body map[string]json.RawMessage, name string) (v int64, ok bool, err error) {
	raw, ok := body[name]
	if !ok {
		return 0, false, nil
	}
	if isNull(raw) {
		return 0, false, Invalid(name, "required", name+" cannot be null")
	}
	if err := decodeField(name, raw, &v); err != nil {
		return 0, false, err
	}
	return v, true, nil
}

// applyPlanPatch changes a plan's rule: {preset} or any of reserve, low and high (the
// others keep their values). The new fee applies from the next daily charge.
func (m *Subscriptions) applyPlanPatch(body map[string]json.RawMessage, row *substore.Row) error {
	var preset *string
	nums := map[string]*int64{}
	for _, k := range []string{"preset", "reserve", "low", "high"} {
		raw, ok := body[k]
		if !ok {
			continue
		}
		if k == "preset" {
			if isNull(raw) {
				return Invalid(k, "required", k+" cannot be null")
			}
			var s string
			if err := decodeField(k, raw, &s); err != nil {
				return err
			}
			preset = &s
			continue
		}
		v, _, err := patchInt(body, k)
		if err != nil {
			return err
		}
		nums[k] = &v
	}
	if preset == nil && len(nums) == 0 {
		return nil
	}
	pick := func(k string, cur *int64) *int64 {
		if v, ok := nums[k]; ok {
			return v
		}
		if preset != nil {
			return nil
		}
		return cur
	}
	rule, err := planRule(preset, pick("reserve", row.Reserve), pick("low", row.Low), pick("high", row.High))
	if err != nil {
		return err
	}
	if vs := rule.Validate(); len(vs) > 0 {
		return ruleInvalid(vs)
	}
	row.Reserve, row.Low, row.High = &rule.Reserve, &rule.Low, &rule.High
	row.Preset = autorefill.PresetOf(rule)
	row.ThresholdAmount, row.RefillAmount = rule.Low, autorefill.SmallestTopUp(rule)
	row.DailyFeeSun = autorefill.DailyFeeSun(rule.Reserve)
	return nil
}

// changeStatus applies PATCH status: only active and paused. Pausing an active or
// suspended subscription, or on one the platform paused, is a user pause (subscription.paused,
// reason user), which only the owner ends. Resuming a
// paused one makes it active; a plan whose daily fee is due (a failed charge, or billing
// time passed while paused) is charged first, and 4001 refuses the resume. Asking for the
// status it has, or active while suspended (the platform resumes it), changes nothing.
func (m *Subscriptions) changeStatus(ctx context.Context, tx pgx.Tx, row *substore.Row, to string, now time.Time) error {
	switch autorefill.Status(to) {
	case autorefill.Paused:
		// A platform pause (reserve_exhausted, billing_failed) ends by itself; the owner's
		// pause must not, so it becomes a user pause.
		if row.Status == autorefill.Paused && row.StatusReason != nil && *row.StatusReason == autorefill.ReasonUser {
			return nil
		}
		reason := autorefill.ReasonUser
		row.Status, row.StatusReason, row.SuspendedReqSun = autorefill.Paused, &reason, nil
		if err := substore.AddHistory(ctx, tx, row.ID, substore.History{Kind: autorefill.HistPause, At: now}); err != nil {
			return err
		}
		return substore.Emit(ctx, tx, *row, events.EventSubscriptionPaused,
			events.SubscriptionPaused{SubscriptionID: row.ID, Receiver: row.Receiver, Reason: reason})
	case autorefill.Active:
		if row.Status != autorefill.Paused {
			return nil
		}
		if row.Kind == autorefill.Plan && row.NextBillingAt != nil && !row.NextBillingAt.After(now) {
			if err := substore.ChargeFee(ctx, tx, m.o.Ledger, row, now, now); err != nil {
				return err
			}
		}
		row.Status, row.StatusReason, row.GraceUntil = autorefill.Active, nil, nil
		return substore.AddHistory(ctx, tx, row.ID, substore.History{Kind: autorefill.HistResume, At: now})
	}
	return Invalid("status", "enum", "status can be set to active or paused only").With("allowed", []string{"active", "paused"})
}

// ---- DELETE /v1/subscriptions/{id} ----

// deleteSubscription cancels: terminal, the record stays readable, rentals already
// delivered run to expiry (not reclaimed, not refunded). Cancelling a cancelled
// subscription answers 204 again and changes nothing, so a retried DELETE is safe.
func (m *Subscriptions) deleteSubscription(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p, err := accountOf(rc)
	if err != nil {
		return err
	}
	id := pathValue(rc, "subscriptionId")
	if !subscriptionIDPattern.MatchString(id) {
		return subscriptionNotFound(id)
	}
	err = pgx.BeginFunc(ctx, m.o.Ledger.Pool(), func(tx pgx.Tx) error {
		row, err := substore.Lock(ctx, tx, p.AccountID, id)
		if errors.Is(err, substore.ErrNotFound) {
			return subscriptionNotFound(id)
		}
		if err != nil || row.Status == autorefill.Cancelled {
			return err
		}
		now := m.now()
		row.Status, row.StatusReason, row.SuspendedReqSun, row.NextCheckAt, row.GraceUntil = autorefill.Cancelled, nil, nil, nil, nil
		row.NextBillingAt = nil
		if err := substore.AddHistory(ctx, tx, row.ID, substore.History{Kind: autorefill.HistCancel, At: now}); err != nil {
			return err
		}
		return substore.Save(ctx, tx, row, now)
	})
	if err != nil {
		return err
	}
	NoContent(rc)
	return nil
}
