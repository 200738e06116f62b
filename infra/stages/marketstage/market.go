// Package marketstage wires the market sampler (processors/marketwatch) and the dev
// stack's simulated market providers.
package marketstage

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"rental/infra/config"
	"rental/infra/marketfeed"
	"rental/infra/marketstore"
	"rental/infra/pricecache"
	"rental/infra/pricestore"
	"rental/infra/stages"
	"rental/infra/supply"
	"rental/processors/marketwatch"
	"rental/schemas/pricing"
)

// MarketFeeds are the sampler's feeds from configuration (MARKET_FEEDS), plus this
// service's own row read from snaps.
func MarketFeeds(cfg config.Config, snaps pricing.SnapshotSource) []marketfeed.Feed {
	fs := []marketfeed.Feed{marketfeed.Snapshot{SlugName: cfg.Market.SelfSlug, Src: snaps}}
	for _, f := range cfg.Market.Feeds {
		switch f.Kind {
		case "offers":
			fs = append(fs, marketfeed.NewOffers(f.Slug, f.URL))
		case "prices":
			fs = append(fs, marketfeed.NewPrices(f.Slug, f.URL))
		}
	}
	return fs
}

// MarketWatch is the market sampler stage (processors/marketwatch), with the pricer
// snapshot source its own row is read from.
func MarketWatch(cfg config.Config, pool *pgxpool.Pool, rdb *redis.Client, log *slog.Logger, reg prometheus.Registerer) (stages.Runner, error) {
	src := pricecache.NewSource(rdb, pricecache.SourceOptions{Network: cfg.Network, Durable: pricestore.New(pool), Logger: log})
	w, err := marketwatch.New(marketwatch.Options{
		Feeds:      MarketFeeds(cfg, src),
		Store:      marketstore.New(pool, cfg.Network),
		Every:      cfg.Market.Every,
		Retention:  cfg.Market.Retention,
		Logger:     log,
		Registerer: reg,
	})
	if err != nil {
		return nil, err
	}
	// The first cycle waits (a few seconds at most) for the source to have read Redis, so
	// the own row is not missing from the first sample.
	first := stages.RunnerFunc(func(ctx context.Context) error {
		select {
		case <-src.Ready():
		case <-time.After(5 * time.Second):
		case <-ctx.Done():
			return nil
		}
		return w.Run(ctx)
	})
	return stages.Together(src, first), nil
}

// DevMarketProviders serves the dev stack's simulated market providers
// (config.DevMarketFeeds) until ctx ends (a provider whose port is taken is skipped): three energy prices, and simflaky stops
// answering once it has been sampled, so that its row on GET /v1/market turns stale after
// 15 minutes.
func DevMarketProviders(ctx context.Context, log *slog.Logger) error {
	prices := map[string]pricing.Centisun{"simcheap": 4_550, "simmid": 7_025, "simflaky": 5_800}
	g, gctx := errgroup.WithContext(ctx)
	for _, f := range config.DevMarketFeeds {
		p := supply.NewProviderServer(f.Slug, []supply.WireOffer{
			{Resource: pricing.Energy, Tier: pricing.Tier1h, PriceSun: prices[f.Slug], Amount: 2_000_000},
			{Resource: pricing.Energy, Tier: pricing.Tier1d, PriceSun: prices[f.Slug] * 3, Amount: 1_000_000},
		})
		h := p.Handler()
		if f.Slug == "simflaky" {
			inner := h
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				inner.ServeHTTP(w, r)
				if r.Method == http.MethodGet && r.URL.Path == "/v1/offers" {
					p.SetFailing(true) // answered once: from now on it does not
				}
			})
		}
		srv := &http.Server{Addr: f.URL[len("http://"):], Handler: h, ReadHeaderTimeout: 5 * time.Second}
		g.Go(func() error {
			go func() { <-gctx.Done(); _ = srv.Close() }()
			log.Info("simulated market provider", "slug", f.Slug, "addr", srv.Addr)
			// A busy port (another dev stack on this machine) costs only this simulation:
			// the board then shows whatever answers there, or a stale row.
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				log.Warn("simulated market provider not served", "slug", f.Slug, "addr", srv.Addr, "err", err)
			}
			return nil
		})
	}
	return g.Wait()
}
