// Package market is the pure model of the market board (GET /v1/market) and its history
// (GET /v1/market/history): provider metadata, price samples, and the rules that turn the
// latest sample of every provider into the ranked board. No I/O; docs/market.md.
package market

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"rental/schemas/events"
)

// Rules of the board the spec fixes.
const (
	// StaleAfter: a row whose sample is older than this is stale (spec MarketBoard).
	StaleAfter = 15 * time.Minute
	// SampleEvery is how often every provider is sampled (spec MarketBoard).
	SampleEvery = 5 * time.Minute
)

// History bounds of GET /v1/market/history (docs/market.md).
const (
	DefaultHistoryHours = 24
	MaxHistoryHours     = 720 // 30 days, the sample retention
	// Retention is how long samples are kept before pruning; it covers MaxHistoryHours.
	Retention = time.Duration(MaxHistoryHours) * time.Hour
)

// Kind is how a provider sells (spec enum).
type Kind string

const (
	KindAPI    Kind = "api"
	KindBot    Kind = "bot"
	KindPool   Kind = "pool"
	KindMarket Kind = "market"
	KindWeb    Kind = "web"
)

// Kinds is the enum in the spec's order.
var Kinds = []Kind{KindAPI, KindBot, KindPool, KindMarket, KindWeb}

// ParseKind checks k against the enum.
func ParseKind(k string) (Kind, error) {
	if slices.Contains(Kinds, Kind(k)) {
		return Kind(k), nil
	}
	return "", fmt.Errorf("market: kind %q is not one of api, bot, pool, market, web", k)
}

// Links are a provider's public links; each is null when unknown.
type Links struct {
	Site     *string `json:"site"`
	Telegram *string `json:"telegram"`
	Twitter  *string `json:"twitter"`
	Github   *string `json:"github"`
	Docs     *string `json:"docs"`
	Referral *string `json:"referral"`
	Logo     *string `json:"logo"`
}

// LinkNames are the keys of Links, for the admin command.
var LinkNames = []string{"site", "telegram", "twitter", "github", "docs", "referral", "logo"}

// Set sets the link called name; an empty value clears it.
func (l *Links) Set(name, value string) error {
	var p **string
	switch name {
	case "site":
		p = &l.Site
	case "telegram":
		p = &l.Telegram
	case "twitter":
		p = &l.Twitter
	case "github":
		p = &l.Github
	case "docs":
		p = &l.Docs
	case "referral":
		p = &l.Referral
	case "logo":
		p = &l.Logo
	default:
		return fmt.Errorf("market: unknown link %q", name)
	}
	if value == "" {
		*p = nil
	} else {
		*p = &value
	}
	return nil
}

// Provider is one row's operator data: who the provider is. Disabled providers are not on
// the board (their samples stay until pruned).
type Provider struct {
	Slug    string
	Name    string
	Kinds   []Kind
	Links   Links
	Enabled bool
}

var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,39}$`)

// ErrSlug is an invalid provider slug.
var ErrSlug = errors.New("market: slug must be 1 to 40 of a-z, 0-9, _ and -, starting with a letter or digit")

// ValidSlug checks a slug's form.
func ValidSlug(s string) error {
	if !slugRE.MatchString(s) {
		return ErrSlug
	}
	return nil
}

// Quote is what one provider's price API says now. Prices are per energy unit for the
// whole rental, in hundredths of a SUN (events.Centisun); nil is "not offered".
type Quote struct {
	PriceSun1h      *events.Centisun
	PriceSun1d      *events.Centisun
	AvailableEnergy *int64
	TotalEnergy     *int64
}

// Sample is a Quote taken at TS from provider Slug.
type Sample struct {
	Slug string
	TS   time.Time
	Quote
}

// Slot is the sampling slot of t: samples of one provider in one slot are one sample, so
// two sampler replicas do not double the history.
func Slot(t time.Time, every time.Duration) int64 {
	if every <= 0 {
		every = SampleEvery
	}
	return t.UnixMilli() / every.Milliseconds()
}

// Row is one provider of the board (spec MarketBoard providers[]).
type Row struct {
	Slug            string           `json:"slug"`
	Name            string           `json:"name"`
	Rank            *int             `json:"rank"`
	PriceSun1h      *events.Centisun `json:"price_sun_1h"`
	PriceSun1d      *events.Centisun `json:"price_sun_1d"`
	SavingsPct      *Fraction        `json:"savings_pct"`
	AvailableEnergy *int64           `json:"available_energy"`
	TotalEnergy     *int64           `json:"total_energy"`
	Kinds           []Kind           `json:"kinds"`
	Links           Links            `json:"links"`
	TS              *events.Time     `json:"ts"`
	Stale           bool             `json:"stale"`
}

// Summary is the board's summary over the fresh rows.
type Summary struct {
	AvgPriceSun1h   *events.Centisun `json:"avg_price_sun_1h"`
	ActiveProviders int              `json:"active_providers"`
}

// Board is the spec's MarketBoard.
type Board struct {
	AsOf      events.Time `json:"as_of"`
	BurnSun   int64       `json:"burn_sun"`
	Providers []Row       `json:"providers"`
	Summary   Summary     `json:"summary"`
}

// Fraction is a number with two decimals held in hundredths (0.42 is 42); it prints as a
// JSON number.
type Fraction int64

func (f Fraction) MarshalJSON() ([]byte, error) {
	return events.Centisun(f).MarshalJSON()
}

// Savings is 1 − price/burn, rounded half away from zero to two decimals: 0.40 means the
// provider's 1 h energy costs 40 % less than burning TRX for it. Negative when dearer than
// burning. burnSun must be positive.
func Savings(price events.Centisun, burnSun int64) Fraction {
	burn := burnSun * 100 // centisun
	num := (burn - int64(price)) * 100
	q, r := num/burn, num%burn
	if 2*abs(r) >= burn {
		if num < 0 {
			q--
		} else {
			q++
		}
	}
	return Fraction(q)
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// BuildBoard ranks the latest sample of every enabled provider (docs/market.md):
//   - a row without a sample has every figure and ts null and is stale;
//   - a row is stale when its sample is older than StaleAfter at now; it keeps the figures
//     of its last sample (ts says how old) but counts in neither summary figure;
//   - rows are sorted by price_sun_1h ascending, nulls last (ties by slug); rank numbers the
//     rows with a price from 1 (equal prices share no rank: ties are broken by slug);
//   - savings_pct is Savings of price_sun_1h against burnSun (null without a price or
//     without burnSun);
//   - summary.avg_price_sun_1h is the mean 1 h price of the fresh rows with a price,
//     rounded to the hundredth; active_providers counts those rows.
func BuildBoard(now time.Time, burnSun int64, providers []Provider, latest map[string]Sample) Board {
	b := Board{AsOf: events.Time(now), BurnSun: burnSun, Providers: []Row{}}
	var sum, n int64
	for _, p := range providers {
		if !p.Enabled {
			continue
		}
		r := Row{Slug: p.Slug, Name: p.Name, Kinds: p.Kinds, Links: p.Links, Stale: true}
		if r.Kinds == nil {
			r.Kinds = []Kind{}
		}
		if s, ok := latest[p.Slug]; ok {
			ts := events.Time(s.TS)
			r.TS = &ts
			r.PriceSun1h, r.PriceSun1d = s.PriceSun1h, s.PriceSun1d
			r.AvailableEnergy, r.TotalEnergy = s.AvailableEnergy, s.TotalEnergy
			r.Stale = now.Sub(s.TS) > StaleAfter
			if r.PriceSun1h != nil && burnSun > 0 {
				f := Savings(*r.PriceSun1h, burnSun)
				r.SavingsPct = &f
			}
			if !r.Stale && r.PriceSun1h != nil {
				sum += int64(*r.PriceSun1h)
				n++
			}
		}
		b.Providers = append(b.Providers, r)
	}
	slices.SortStableFunc(b.Providers, func(x, y Row) int {
		switch {
		case x.PriceSun1h == nil && y.PriceSun1h == nil:
		case x.PriceSun1h == nil:
			return 1
		case y.PriceSun1h == nil:
			return -1
		case *x.PriceSun1h != *y.PriceSun1h:
			if *x.PriceSun1h < *y.PriceSun1h {
				return -1
			}
			return 1
		}
		if x.Slug < y.Slug {
			return -1
		}
		if x.Slug > y.Slug {
			return 1
		}
		return 0
	})
	rank := 0
	for i := range b.Providers {
		if b.Providers[i].PriceSun1h != nil {
			rank++
			r := rank
			b.Providers[i].Rank = &r
		}
	}
	b.Summary.ActiveProviders = int(n)
	if n > 0 {
		avg := events.Centisun((sum + n/2) / n)
		b.Summary.AvgPriceSun1h = &avg
	}
	return b
}

// Point is one sample of GET /v1/market/history.
type Point struct {
	TS              events.Time      `json:"ts"`
	PriceSun1h      *events.Centisun `json:"price_sun_1h"`
	PriceSun1d      *events.Centisun `json:"price_sun_1d"`
	AvailableEnergy *int64           `json:"available_energy"`
}

// History is the body of GET /v1/market/history.
type History struct {
	Slug   string  `json:"slug"`
	Hours  int     `json:"hours"`
	Points []Point `json:"points"`
}

// HistoryOf turns samples (oldest first) into the history body.
func HistoryOf(slug string, hours int, samples []Sample) History {
	h := History{Slug: slug, Hours: hours, Points: make([]Point, 0, len(samples))}
	for _, s := range samples {
		h.Points = append(h.Points, Point{TS: events.Time(s.TS), PriceSun1h: s.PriceSun1h, PriceSun1d: s.PriceSun1d,
			AvailableEnergy: s.AvailableEnergy})
	}
	return h
}

// ErrHours is an hours value outside 1..MaxHistoryHours.
var ErrHours = fmt.Errorf("market: hours must be from 1 to %d", MaxHistoryHours)

// CheckHours validates a history window.
func CheckHours(h int) error {
	if h < 1 || h > MaxHistoryHours {
		return ErrHours
	}
	return nil
}
