// Command pricesbench serves GET /v1/prices through the real edge (the pricing module over a
// fixed in-memory snapshot) and, on a second port, a trivial fasthttp handler, so that a load
// tool can measure both on the same machine in the same run (infra/bench/prices.sh). With
// -resources the same edge also serves GET /v1/resources/{address} over the TRON node
// simulator and the Redis cache (infra/bench/resources.sh). It listens on loopback only,
// prints one line
//
//	ready edge=127.0.0.1:PORT ref=127.0.0.1:PORT [address=T...]
//
// on stdout once both listeners accept, and runs until SIGINT or SIGTERM.
//
// The edge runs as edge.New builds it (request ids, access metrics, panic recovery, routing,
// authentication dispatch, the error mapping) without a rate limiter: a per-IP budget is a
// Redis round trip per request and would measure Redis, not the endpoint.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"rental/edge"
	"rental/infra/acceptance"
	"rental/infra/health"
	"rental/infra/tron"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

func main() {
	edgeAddr := flag.String("edge", "127.0.0.1:0", "listen address of the edge")
	refAddr := flag.String("ref", "127.0.0.1:0", "listen address of the trivial fasthttp handler")
	resources := flag.Bool("resources", false, "also serve GET /v1/resources/{address} (resources.go) and print address=")
	flag.Parse()
	if err := run(*edgeAddr, *refAddr, *resources); err != nil {
		fmt.Fprintln(os.Stderr, "pricesbench:", err)
		os.Exit(1)
	}
}

// okStatus satisfies the edge's required StatusReporter.
type okStatus struct{}

func (okStatus) Report(context.Context) health.Report {
	return health.Report{Status: health.Operational, AsOf: time.Now()}
}

// snapshot is the shipped default model (the one migration 00006 seeds) with supply of every
// class, valid for the whole run.
func snapshot(now time.Time) (pricing.Snapshot, error) {
	m := pricing.DefaultModel(network.Nile)
	m.ValidFor = 24 * time.Hour
	return pricing.Build(pricing.Inputs{Model: m, Now: now, DeliveredToday: 12_345_678, Supply: pricing.Supply{
		Instant: map[pricing.Resource]int64{pricing.Energy: 20_000_000, pricing.Bandwidth: 500_000},
		Offers: []pricing.Offer{
			{Class: pricing.ClassMarket, Source: "p1", Resource: pricing.Energy, Tier: pricing.Tier1h, Cost: 6_100, Amount: 5_000_000},
			{Class: pricing.ClassDeep, Source: "deep", Resource: pricing.Energy, Tier: pricing.Tier1h, Cost: 7_500, Amount: 50_000_000},
		},
	}})
}

func run(edgeAddr, refAddr string, resources bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	snap, err := snapshot(time.Now())
	if err != nil {
		return err
	}
	prices, err := acceptance.NewPrices(acceptance.PricesOptions{
		Network: network.Nile, Snapshots: pricing.StaticSource{Snap: snap},
		Chain:  tron.NewClient("http://127.0.0.1:1"), // never read by GET /v1/prices
		Logger: log,
	})
	if err != nil {
		return err
	}
	mod, err := edge.NewPricing(edge.PricingOptions{Prices: prices, Logger: log})
	if err != nil {
		return err
	}
	modules, extra := []edge.Module{mod}, ""
	if resources {
		res, addr, err := resourcesModule(ctx)
		if err != nil {
			return err
		}
		modules, extra = append(modules, res), " address="+addr
	}
	srv, err := edge.New(edge.Options{
		Logger: log, Registerer: prometheus.NewRegistry(), Network: network.Nile, Brand: "bench",
		Status: okStatus{}, Modules: modules, ShutdownGrace: time.Second,
	})
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	eln, err := lc.Listen(ctx, "tcp", edgeAddr)
	if err != nil {
		return err
	}
	rln, err := lc.Listen(ctx, "tcp", refAddr)
	if err != nil {
		return err
	}
	ref := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		rc.SetContentType("application/json")
		rc.SetBodyString(`{"ok":true}`)
	}}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ctx, eln) }()
	go func() { errc <- ref.Serve(rln) }()
	fmt.Printf("ready edge=%s ref=%s%s\n", eln.Addr(), rln.Addr(), extra)
	_ = os.Stdout.Sync()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	_ = ref.Shutdown()
	return nil
}
