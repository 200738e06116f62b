package edge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/substore"
	"rental/schemas/apierr"
	"rental/schemas/autorefill"
	"rental/schemas/pricing"
)

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
	if m.o.Prices == nil {
		return nil
	}
	s, err := m.o.Prices.Snapshot()
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
