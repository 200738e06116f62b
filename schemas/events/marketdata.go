package events

import (
	"errors"
	"strconv"
	"strings"

	"rental/schemas/network"
)

// This file holds the market-data records: the price table and order books that the pricer
// stage publishes on topics.MarketData and that the edge serves as GET /v1/prices and
// GET /v1/orderbook. The JSON shapes are the spec's PriceTable and OrderBook records
// (rental-api-v1.md, "Price, market and chain records"); marketdata.schema.json describes the
// same shapes for data teams. Keep the three in step.
//
// Everything that is money is an integer number of SUN, or a Centisun where the spec shows a
// `number` price (two decimals). No float is used to produce or read these records.

// MarketDataVersion is the version of the MarketData shape; it rises only for a breaking
// change (additive fields keep it).
const MarketDataVersion = 1

// MarketDataKey is the record key of every MarketData record. topics.MarketData is compacted,
// so the topic keeps exactly the latest snapshot: one record carries the table and every book
// of one pricing cycle, so a reader never sees a table from one cycle next to a book from
// another.
const MarketDataKey = "snapshot"

// Resource is the spec's resource enum.
type Resource string

const (
	Energy     Resource = "energy"
	Bandwidth  Resource = "bandwidth"
	Activation Resource = "activation"
)

// Tier is the spec's rental-period enum. Only 5m and 1h are sold; 1d exists but is switched
// off; 15m, 3d and 30d are retired and stay only so that old records parse.
type Tier string

const (
	Tier5m  Tier = "5m"
	Tier15m Tier = "15m"
	Tier1h  Tier = "1h"
	Tier1d  Tier = "1d"
	Tier3d  Tier = "3d"
	Tier30d Tier = "30d"
)

// LevelClass says where a level of the order book comes from.
type LevelClass string

const (
	// ClassInstant is the platform's own stake pool inventory, read from the chain.
	ClassInstant LevelClass = "instant"
	// ClassMarket is bought from an external provider (wholesale market).
	ClassMarket LevelClass = "market"
	// ClassDeep is the on-chain deep reserve rental contract, the most expensive fallback.
	ClassDeep LevelClass = "deep"
)

// RuleState is whether a price row is sold.
type RuleState string

const (
	// StateOnSale rows are listed with available = true and can be ordered.
	StateOnSale RuleState = "on_sale"
	// StateOff rows exist but are switched off: listed with available = false, ordering is
	// refused with 2003 tier_unavailable.
	StateOff RuleState = "off"
	// StatePaused rows are temporarily withdrawn: omitted from the price table, ordering is
	// refused with 5006 supply_paused.
	StatePaused RuleState = "paused"
)

// MarketData is one record on topics.MarketData (key MarketDataKey): everything one pricing
// cycle computed. Prices and Books are exactly what the edge answers on GET /v1/prices and
// GET /v1/orderbook (without a walk); Rules carries the per-row rules behind them (including
// paused rows, which the table omits) so that a reader can price any amount the same way the
// service does.
type MarketData struct {
	Version    int             `json:"version"`
	Network    network.Network `json:"network"`
	AsOf       Time            `json:"as_of"`
	ValidUntil Time            `json:"valid_until"`
	// ModelRevision is the revision of the operator-edited price model this was computed from.
	ModelRevision int64       `json:"model_revision"`
	Prices        PriceTable  `json:"prices"`
	Books         []OrderBook `json:"books"`
	Rules         []PriceRule `json:"rules"`
}

// PriceTable is the spec's PriceTable (GET /v1/prices).
type PriceTable struct {
	Network    network.Network `json:"network"`
	AsOf       Time            `json:"as_of"`
	ValidUntil Time            `json:"valid_until"`
	Period     Period          `json:"period"`
	Schedule   []DayPartPrice  `json:"schedule"`
	// AvailableEnergy is the depth of the energy 1h order book.
	AvailableEnergy int64 `json:"available_energy"`
	// DeliveredToday is the energy delivered since 00:00 UTC.
	DeliveredToday int64 `json:"delivered_today"`
	// PaymentAddresses are the direct-transfer shortcut addresses (name -> address).
	PaymentAddresses map[string]string `json:"payment_addresses"`
	// AvailableBandwidth is the depth of the bandwidth 1h order book.
	AvailableBandwidth int64       `json:"available_bandwidth"`
	Items              []PriceItem `json:"items"`
	// Activation is null while activation sales are paused.
	Activation *ActivationPrice `json:"activation"`
}

// Period is the day-part in force at AsOf. Start and End are HH:MM UTC; the End of a part
// that runs to midnight is "24:00".
type Period struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Start string `json:"start"`
	End   string `json:"end"`
}

// DayPartPrice is one row of the day-part schedule. StartUTCMinute is inclusive and
// EndUTCMinute exclusive (minutes from 00:00 UTC, 0..1440). PriceSunPerUnit is the 1 h energy
// price in that part, null when 1 h energy is not on sale.
type DayPartPrice struct {
	ID              string    `json:"id"`
	Label           string    `json:"label"`
	StartUTCMinute  int       `json:"start_utc_minute"`
	EndUTCMinute    int       `json:"end_utc_minute"`
	FactorBPS       int64     `json:"factor_bps"`
	PriceSunPerUnit *Centisun `json:"price_sun_per_unit"`
}

// PriceItem is one row of the price table: the price per unit for the whole rental, as an
// integer (the exact price rounded up to whole SUN).
type PriceItem struct {
	Resource        Resource     `json:"resource"`
	Tier            Tier         `json:"tier"`
	PriceSunPerUnit int64        `json:"price_sun_per_unit"`
	MinAmount       int64        `json:"min_amount"`
	MaxAmount       int64        `json:"max_amount"`
	VolumeTiers     []VolumeTier `json:"volume_tiers"`
	Available       bool         `json:"available"`
}

// VolumeTier is the per-unit price (rounded up to whole SUN) for an order of at least
// MinAmount. The first entry is the row's own minimum.
type VolumeTier struct {
	MinAmount       int64 `json:"min_amount"`
	PriceSunPerUnit int64 `json:"price_sun_per_unit"`
}

// ActivationPrice is the one-off price of activating an address.
type ActivationPrice struct {
	PriceSun int64 `json:"price_sun"`
}

// OrderBook is the spec's OrderBook (GET /v1/orderbook) for one resource and tier.
type OrderBook struct {
	Resource   Resource `json:"resource"`
	Tier       Tier     `json:"tier"`
	AsOf       Time     `json:"as_of"`
	ValidUntil Time     `json:"valid_until"`
	// FloorSun is the cheapest level's price, null for an empty book.
	FloorSun *Centisun `json:"floor_sun"`
	// Depth is the sum of the levels' amounts.
	Depth  int64   `json:"depth"`
	Levels []Level `json:"levels"`
	// Walk is the fill of a requested amount, null when no amount was asked.
	Walk *Walk `json:"walk"`
	// CheaperFrom is the start of the next day-part with a lower factor, null when none is
	// cheaper or the row does not follow the schedule.
	CheaperFrom *Time `json:"cheaper_from"`
}

// Level is one price level; levels are sorted cheapest first.
type Level struct {
	PriceSun Centisun   `json:"price_sun"`
	Amount   int64      `json:"amount"`
	Class    LevelClass `json:"class"`
}

// Fill is the part of a walk taken from one level, at the price paid for it.
type Fill struct {
	PriceSun Centisun   `json:"price_sun"`
	Amount   int64      `json:"amount"`
	Class    LevelClass `json:"class"`
}

// Walk is the result of filling Amount from the cheapest level upward.
type Walk struct {
	Amount int64  `json:"amount"`
	Fills  []Fill `json:"fills"`
	// UnitPriceSun is the volume-weighted price of the filled part, rounded half up to 0.01.
	UnitPriceSun Centisun `json:"unit_price_sun"`
	// TotalSun is the exact sum of the fills rounded up to whole SUN.
	TotalSun    int64 `json:"total_sun"`
	Complete    bool  `json:"complete"`
	Outstanding int64 `json:"outstanding"`
}

// PriceRule is the rule behind one price row, as exact fixed-point prices in the day-part of
// AsOf (not part of the spec's PriceTable; the market-data product carries it so that a reader
// can reproduce any price). Retired tiers never have a rule.
type PriceRule struct {
	Resource  Resource  `json:"resource"`
	Tier      Tier      `json:"tier"`
	State     RuleState `json:"state"`
	MinAmount int64     `json:"min_amount"`
	MaxAmount int64     `json:"max_amount"`
	// UnitPriceSun is the list price: the price of the instant level.
	UnitPriceSun Centisun `json:"unit_price_sun"`
	// VolumeTiers are the instant prices by order size, ascending by MinAmount; the first
	// starts at MinAmount with UnitPriceSun.
	VolumeTiers []RuleVolumeTier `json:"volume_tiers"`
	// FollowsSchedule says whether the day-part factor applies to this row.
	FollowsSchedule bool `json:"follows_schedule"`
}

// RuleVolumeTier is the exact instant price for orders of at least MinAmount.
type RuleVolumeTier struct {
	MinAmount    int64    `json:"min_amount"`
	UnitPriceSun Centisun `json:"unit_price_sun"`
}

// Centisun is a price in hundredths of a SUN (fixed point, two decimals). It is written in
// JSON as a plain number with at most two decimals (7250 -> 72.5, 7205 -> 72.05, 7200 -> 72)
// and read back from such a number without floats; more than two decimals, an exponent or a
// negative value is refused.
type Centisun int64

// CentisunPerSun is the number of Centisun in one SUN.
const CentisunPerSun = 100

// String renders c as a decimal number, trailing fractional zeros removed.
func (c Centisun) String() string {
	neg := c < 0
	u := uint64(c)
	if neg {
		u = uint64(-c)
	}
	s := strconv.FormatUint(u/100, 10)
	if f := u % 100; f != 0 {
		frac := strconv.FormatUint(100+f, 10)[1:] // two digits, leading zero kept
		s += "." + strings.TrimRight(frac, "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// MarshalJSON writes c as a JSON number.
func (c Centisun) MarshalJSON() ([]byte, error) { return []byte(c.String()), nil }

var errCentisun = errors.New("centisun: want a non-negative decimal number with at most two decimals")

// ParseCentisun reads a non-negative decimal with at most two decimals ("72", "72.5",
// "72.05").
func ParseCentisun(s string) (Centisun, error) {
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || (hasFrac && (frac == "" || len(frac) > 2)) {
		return 0, errCentisun
	}
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return 0, errCentisun
		}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > (1<<63-1)/100-1 {
		return 0, errCentisun
	}
	var f int64
	if hasFrac {
		f, _ = strconv.ParseInt((frac + "0")[:2], 10, 64)
	}
	return Centisun(w*100 + f), nil
}

// UnmarshalJSON reads a JSON number written by MarshalJSON.
func (c *Centisun) UnmarshalJSON(b []byte) error {
	v, err := ParseCentisun(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}
