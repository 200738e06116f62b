package config

import (
	"fmt"
	"strings"
	"time"

	"rental/infra/tron"
	"rental/schemas/market"
)

// Market configures the market board's sampler (processors/marketwatch) and the chain
// reads of GET /v1/resources and POST /v1/estimate/transfer (docs/market.md).
type Market struct {
	// Feeds are the providers sampled (MARKET_FEEDS, "slug=kind:url,..." with kind offers
	// (the wholesale offers API) or prices (a rental-api-v1 GET /v1/prices)). Unset, the
	// dev stack's three simulated providers (DevMarketFeeds); "off" samples none but our own.
	Feeds []MarketFeed
	// SimProviders is true when Feeds are DevMarketFeeds: the dev stack then serves them.
	SimProviders bool
	// SelfSlug is this service's own row on the board (MARKET_SELF_SLUG, default BRAND).
	SelfSlug string
	// Every is the sampling period (MARKET_SAMPLE_INTERVAL, default 5m, the spec's).
	Every time.Duration
	// Retention is how long samples are kept (MARKET_RETENTION, default 720h; it must
	// cover market.MaxHistoryHours).
	Retention time.Duration
	// ResourcesTTL is how long an address's resources are cached (RESOURCES_CACHE_TTL,
	// default 3s, at most 10s: the spec's "a few seconds").
	ResourcesTTL time.Duration
	// SupportedTRC20 are the contracts POST /v1/estimate/transfer accepts
	// (SUPPORTED_TRC20, comma-separated Base58Check); empty means USDT_CONTRACT alone.
	SupportedTRC20 []tron.Address
}

// MarketFeed is one sampled provider.
type MarketFeed struct {
	Slug string
	Kind string // "offers" or "prices"
	URL  string
}

// DevMarketFeeds are the dev stack's simulated providers: three prices, and simflaky stops
// answering after its first sample so that its row turns stale.
var DevMarketFeeds = []MarketFeed{
	{Slug: "simcheap", Kind: "offers", URL: "http://127.0.0.1:8092"},
	{Slug: "simmid", Kind: "offers", URL: "http://127.0.0.1:8093"},
	{Slug: "simflaky", Kind: "offers", URL: "http://127.0.0.1:8094"},
}

func loadMarket(c *Config, str func(name, def string) string, dur func(name string, def time.Duration) time.Duration) []string {
	var errs []string
	m := Market{
		SelfSlug:     str("MARKET_SELF_SLUG", strings.ToLower(c.Brand)),
		Every:        dur("MARKET_SAMPLE_INTERVAL", market.SampleEvery),
		Retention:    dur("MARKET_RETENTION", market.Retention),
		ResourcesTTL: dur("RESOURCES_CACHE_TTL", 3*time.Second),
	}
	if err := market.ValidSlug(m.SelfSlug); err != nil {
		errs = append(errs, fmt.Sprintf("MARKET_SELF_SLUG=%q: %v", m.SelfSlug, err))
	}
	if m.Retention < time.Duration(market.MaxHistoryHours)*time.Hour {
		errs = append(errs, fmt.Sprintf("MARKET_RETENTION=%s: must cover the %d h of history served", m.Retention, market.MaxHistoryHours))
	}
	if m.ResourcesTTL > 10*time.Second {
		errs = append(errs, "RESOURCES_CACHE_TTL: at most 10s (the spec caches address resources a few seconds)")
	}
	switch feeds := str("MARKET_FEEDS", ""); feeds {
	case "":
		m.Feeds, m.SimProviders = DevMarketFeeds, true
	case "off":
	default:
		for _, f := range splitList(feeds) {
			slug, rest, ok1 := strings.Cut(f, "=")
			kind, u, ok2 := strings.Cut(rest, ":")
			if !ok1 || !ok2 || market.ValidSlug(slug) != nil || (kind != "offers" && kind != "prices") || u == "" {
				errs = append(errs, fmt.Sprintf("MARKET_FEEDS: %q: want slug=offers:URL or slug=prices:URL", f))
				continue
			}
			m.Feeds = append(m.Feeds, MarketFeed{Slug: slug, Kind: kind, URL: u})
		}
	}
	if s := str("SUPPORTED_TRC20", ""); s != "" {
		for _, a := range splitList(s) {
			addr, err := tron.ParseAddress(a)
			if err != nil {
				errs = append(errs, fmt.Sprintf("SUPPORTED_TRC20: %q: %v", a, err))
				continue
			}
			m.SupportedTRC20 = append(m.SupportedTRC20, addr)
		}
	}
	c.Market = m
	return errs
}
