package edge

import (
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"rental/infra/acceptance"
	"rental/infra/tron"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// BenchmarkPricesGet measures GET /v1/prices through the whole edge (no rate limiter) on
// loopback with parallel clients; BenchmarkPricesTrivialReference is a trivial fasthttp
// handler measured the same way. `make bench` uses wrk instead (infra/bench/prices.sh);
// these are for quick runs: go test -run '^$' -bench Prices ./edge/
func BenchmarkPricesGet(b *testing.B) {
	m := testModel()
	m.ValidFor = time.Hour
	snap, err := pricing.Build(pricing.Inputs{Model: m, Supply: testSupply(), Now: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	prices, err := acceptance.NewPrices(acceptance.PricesOptions{Network: network.Nile, Snapshots: pricing.StaticSource{Snap: snap}, Chain: tron.NewClient("http://127.0.0.1:1")})
	if err != nil {
		b.Fatal(err)
	}
	mod, err := NewPricing(PricingOptions{Prices: prices})
	if err != nil {
		b.Fatal(err)
	}
	ts := startServerTB(b, withOptions(func(o *Options) { o.Modules = []Module{mod} }))
	benchGet(b, ts.url, "/v1/prices")
}

func BenchmarkPricesTrivialReference(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		rc.SetContentType("application/json")
		rc.SetBodyString(`{"ok":true}`)
	}}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown() })
	benchGet(b, "http://"+ln.Addr().String(), "/")
}

func benchGet(b *testing.B, base, path string) {
	client := &fasthttp.HostClient{Addr: base[len("http://"):], MaxConns: 64}
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(base + path)
		for pb.Next() {
			if err := client.Do(req, resp); err != nil {
				b.Fatal(err)
			}
			if resp.StatusCode() != 200 {
				b.Fatalf("HTTP %d %s", resp.StatusCode(), resp.Body())
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
