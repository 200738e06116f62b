package edge

// Subscription endpoints (rental-api-v1 "Subscriptions", "Subscription", "Subscription
// status"; docs/subscriptions.md):
//
//	GET    /v1/subscriptions/plans   public (a presented key is verified): presets, per-use price, limits
//	GET    /v1/subscriptions         key subscriptions.read or session: the account's, newest first (subscriptions_read.go)
//	POST   /v1/subscriptions         key subscriptions.write or session: plan or legacy body (subscriptions_create.go)
//	GET    /v1/subscriptions/{id}    the record; a plan subscription with its last 20 events (subscriptions_read.go)
//	PATCH  /v1/subscriptions/{id}    status (active, paused), rule, refill parameters, label (subscriptions_change.go)
//	DELETE /v1/subscriptions/{id}    cancel (terminal, the record stays readable) (subscriptions_change.go)
//
// Creation of a plan subscription charges the first day's fee in the same transaction as
// the row, its history and subscription.charged, so a refused charge (4001) stores nothing
// and a subscription never exists unpaid. The watcher (processors/subscriptions) does the
// rest: refills, daily billing, suspension and resumption.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/valyala/fasthttp"

	"rental/infra/acceptance"
	"rental/infra/idempotency"
	"rental/infra/ledgerstore"
	"rental/infra/substore"
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
	// Prices gives the live snapshot: the per-use price of the plans and the amount range
	// of a legacy refill. nil shows the per-use price as null and skips the range check
	// (the refill order is still checked when the watcher places it).
	Prices *acceptance.Prices
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
	if m.o.Prices == nil {
		return pu
	}
	s, err := m.o.Prices.Snapshot()
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
