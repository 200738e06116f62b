package autorefill

import (
	"rental/schemas/events"
)

// Status is a subscription state (rental-api-v1 "Subscription status").
type Status string

const (
	Active    Status = "active"
	Paused    Status = "paused"    // by the user, or by the platform for a plan (billing_failed, reserve_exhausted)
	Suspended Status = "suspended" // by the platform; resumes by itself when the cause clears
	Cancelled Status = "cancelled" // terminal (DELETE)
)

// Statuses lists the enum in the spec's order.
var Statuses = []Status{Active, Paused, Suspended, Cancelled}

// ParseStatus accepts exactly the enum.
func ParseStatus(s string) (Status, bool) {
	for _, v := range Statuses {
		if string(v) == s {
			return v, true
		}
	}
	return "", false
}

// Kind tells the two body forms apart once stored.
type Kind string

const (
	Legacy Kind = "legacy" // {receiver, resource, mode, tier, threshold_amount, refill_amount, ...}
	Plan   Kind = "plan"   // {address, preset} or {address, reserve, low, high}
)

// Mode is the legacy rule type.
type Mode string

const (
	Refill  Mode = "refill"  // order refill_amount when available < threshold_amount
	Renewal Mode = "renewal" // re-order refill_amount as the standing rental expires
)

// Reasons of subscription.suspended (Semantics 7) and subscription.paused.
const (
	ReasonInsufficientFunds = "insufficient_funds"
	ReasonDailyLimit        = "daily_limit_reached"
	ReasonPriceAboveLimit   = "price_above_limit"
	ReasonBillingFailed     = "billing_failed"
	ReasonReserveExhausted  = "reserve_exhausted"
	ReasonUser              = "user"
)

// HistoryKind is SubscriptionEvent.kind.
type HistoryKind string

const (
	HistRefill      HistoryKind = "refill"
	HistCharge      HistoryKind = "charge"
	HistPause       HistoryKind = "pause"
	HistResume      HistoryKind = "resume"
	HistCancel      HistoryKind = "cancel"
	HistTopUpFailed HistoryKind = "top_up_failed"
)

// MaxHistory is how many SubscriptionEvents GET of one plan subscription returns.
const MaxHistory = 20

// Record is the Subscription record every endpoint answers. Plan is nil on legacy
// subscriptions, and then none of the plan fields appear (encoding/json skips the fields
// of a nil embedded pointer).
type Record struct {
	ID               string       `json:"id"`
	Receiver         string       `json:"receiver"`
	Resource         string       `json:"resource"`
	Mode             Mode         `json:"mode"`
	Tier             string       `json:"tier"`
	ThresholdAmount  int64        `json:"threshold_amount"`
	RefillAmount     int64        `json:"refill_amount"`
	MaxPriceSun      *int64       `json:"max_price_sun"`
	MaxRefillsPerDay *int         `json:"max_refills_per_day"`
	DailyFeeSun      int64        `json:"daily_fee_sun"`
	Status           Status       `json:"status"`
	StatusReason     *string      `json:"status_reason"` // our addition: why paused or suspended
	Label            *string      `json:"label"`
	LastRefillAt     *events.Time `json:"last_refill_at"`
	LastOrderID      *string      `json:"last_order_id"`
	RefillsToday     int          `json:"refills_today"`
	CreatedAt        events.Time  `json:"created_at"`
	UpdatedAt        events.Time  `json:"updated_at"`
	*PlanFields
}

// PlanFields are present only on plan subscriptions.
type PlanFields struct {
	Address         string          `json:"address"`
	Preset          *string         `json:"preset"`
	Reserve         *int64          `json:"reserve"`
	Low             *int64          `json:"low"`
	High            *int64          `json:"high"`
	FeeTRXPerDay    float64         `json:"fee_trx_per_day"`
	DelegatedEnergy int64           `json:"delegated_energy"`
	NextBillingAt   *events.Time    `json:"next_billing_at"`
	GraceUntil      *events.Time    `json:"grace_until"`
	Events          *[]HistoryEvent `json:"events,omitempty"` // GET of one only
}

// HistoryEvent is a SubscriptionEvent.
type HistoryEvent struct {
	ID          string      `json:"id"`
	Kind        HistoryKind `json:"kind"`
	EnergyDelta *int64      `json:"energy_delta"`
	AmountSun   *int64      `json:"amount_sun"`
	TxID        *string     `json:"txid"`
	TS          events.Time `json:"ts"`
}

// PlanName is subscription.charged's `plan`: the preset slug, or "custom".
func PlanName(preset *string) string {
	if preset == nil {
		return "custom"
	}
	return *preset
}
