package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/substore"
	"rental/schemas/apierr"
	"rental/schemas/autorefill"
	"rental/schemas/events"
)

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
	// A larger reserve is paid for the rest of the current billing day before the watcher
	// sees it (4001/4002 refuse the change); a smaller one refunds nothing.
	if err := substore.ChargeUpgrade(ctx, tx, m.o.Ledger, &row, now); err != nil {
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
// others keep their values), with its daily fee. A higher fee is charged for the rest of
// the current day by the caller (substore.ChargeUpgrade); every daily charge takes it.
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
