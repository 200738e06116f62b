package main_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/supply"
	"rental/infra/tron"
	"rental/schemas/pricing"
	"rental/schemas/topics"
)

// TestE2EMarketResourcesAndTransferEstimate runs the four chain endpoints on the dev stack,
// public interfaces only: three providers at different prices (one never answers, so its row
// is stale), the board with the service's own row, history, samples on Kafka, resources of
// an activated and a never-activated address with and without the caller's own order,
// transfer estimates to a holder and to a first-time holder, and 5003 with node_down.
func TestE2EMarketResourcesAndTransferEstimate(t *testing.T) {
	var feeds []string
	for slug, price := range map[string]pricing.Centisun{"simcheap": 4_550, "simmid": 7_025, "simflaky": 5_000} {
		p := supply.NewProviderServer(slug, []supply.WireOffer{{Resource: pricing.Energy, Tier: pricing.Tier1h, PriceSun: price, Amount: 1_000_000}})
		p.SetFailing(slug == "simflaky")
		srv := httptest.NewServer(p.Handler())
		t.Cleanup(srv.Close)
		feeds = append(feeds, slug+"=offers:"+srv.URL)
	}
	e := e2eStack(t, "MARKET_FEEDS="+strings.Join(feeds, ","))
	c := e.c

	type row struct {
		Slug       string   `json:"slug"`
		Rank       *int     `json:"rank"`
		PriceSun1h *float64 `json:"price_sun_1h"`
		Stale      bool     `json:"stale"`
	}
	var board struct {
		BurnSun   int64 `json:"burn_sun"`
		Providers []row `json:"providers"`
		Summary   struct {
			ActiveProviders int `json:"active_providers"`
		} `json:"summary"`
	}
	eventually(t, 20*time.Second, "GET /v1/market lists four sampled rows", func() bool {
		c.want(c.api("GET", "/v1/market", nil), 200, "GET /v1/market").decode(t, &board)
		return board.Summary.ActiveProviders == 3
	})
	var order []string
	for _, r := range board.Providers {
		order = append(order, r.Slug)
	}
	if got := strings.Join(order, ","); board.BurnSun != 100 || len(board.Providers) != 4 || !strings.HasPrefix(got, "simcheap,") ||
		!strings.HasSuffix(got, ",simflaky") {
		t.Fatalf("board %s: %+v", got, board)
	}
	if f := board.Providers[3]; !f.Stale || f.Rank != nil || f.PriceSun1h != nil {
		t.Errorf("the provider that never answered: %+v", f)
	}
	if r := board.Providers[0]; r.Stale || r.Rank == nil || *r.Rank != 1 || *r.PriceSun1h != 45.5 {
		t.Errorf("cheapest %+v", r)
	}
	var hist struct {
		Points []map[string]any `json:"points"`
	}
	c.want(c.api("GET", "/v1/market/history?slug=simcheap", nil), 200, "history").decode(t, &hist)
	if len(hist.Points) != 1 {
		t.Errorf("history %+v", hist)
	}
	c.want(c.api("GET", "/v1/market/history?slug=nobody", nil), 200, "history").decode(t, &hist)
	if hist.Points == nil || len(hist.Points) != 0 {
		t.Errorf("unknown slug %+v", hist)
	}
	c.want(c.api("GET", "/v1/market/history", nil), 400, "history without slug")
	consume(t, e.s.kafk, topics.MarketSamples.Name, 20*time.Second, func(r *kgo.Record) bool { return string(r.Key) == "simcheap" })

	// Resources and the caller's own order.
	e.scopes = []string{"estimates.read"}
	e.signup()
	e.deposit(100_000_000)
	e.orderEnergy(65_000)
	type resources struct {
		Activated       bool             `json:"activated"`
		HoldsUSDT       *bool            `json:"holds_usdt"`
		Energy          map[string]int64 `json:"energy"`
		OurActiveOrders []struct {
			OrderID string `json:"order_id"`
		} `json:"our_active_orders"`
	}
	var res resources
	c.want(c.signed("GET", "/v1/resources/"+e.receiver, nil), 200, "GET resources signed").decode(t, &res)
	if !res.Activated || len(res.OurActiveOrders) != 1 || res.OurActiveOrders[0].OrderID != e.order.ID {
		t.Errorf("receiver with the caller's order: %+v", res)
	}
	c.want(c.api("GET", "/v1/resources/"+e.receiver, nil), 200, "GET resources").decode(t, &res)
	if len(res.OurActiveOrders) != 0 {
		t.Errorf("anonymous: %+v", res)
	}
	k, _ := tron.GenerateKey()
	fresh := k.Address().String()
	c.want(c.api("GET", "/v1/resources/"+fresh, nil), 200, "GET resources of a new address").decode(t, &res)
	if res.Activated || res.HoldsUSDT == nil || *res.HoldsUSDT {
		t.Errorf("never activated: %+v", res)
	}
	c.want(c.api("GET", "/v1/resources/T123", nil), 400, "invalid address")

	// Transfer estimates from the faucet (it holds the simulated USDT).
	var info struct{ Faucet string }
	c.want(c.sim("GET", "/sim/info", nil), 200, "sim info").decode(t, &info)
	holder := e.newReceiver()
	c.want(c.sim("POST", "/sim/usdt/transfer", map[string]any{"to": holder, "amount": 1}), 200, "usdt to holder")
	type estimate struct {
		EnergyRequired      int64 `json:"energy_required"`
		RecipientHoldsToken bool  `json:"recipient_holds_token"`
		ActivateAmountSun   int64 `json:"activate_amount_sun"`
	}
	var est estimate
	eventually(t, 10*time.Second, "the USDT transfer to the holder is on chain", func() bool {
		c.want(c.signed("POST", "/v1/estimate/transfer", map[string]any{"from_address": info.Faucet, "to_address": holder, "amount": "1000000"}), 200, "estimate").decode(t, &est)
		return est.RecipientHoldsToken
	})
	var first estimate
	c.want(c.signed("POST", "/v1/estimate/transfer", map[string]any{"from_address": info.Faucet, "to_address": fresh}), 200, "estimate").decode(t, &first)
	if first.RecipientHoldsToken || first.ActivateAmountSun == 0 || est.ActivateAmountSun != 0 ||
		first.EnergyRequired < est.EnergyRequired*18/10 || first.EnergyRequired > est.EnergyRequired*22/10 {
		t.Errorf("to a holder %+v, to a first-time holder %+v (about twice the energy)", est, first)
	}
	c.want(c.signed("POST", "/v1/estimate/transfer", map[string]any{"from_address": info.Faucet, "to_address": fresh, "contract_address": holder}), 422, "2011")

	// The node down.
	c.want(c.sim("POST", "/sim/faults", map[string]any{"kind": "node_down", "count": 20}), 200, "node_down")
	r := c.api("GET", "/v1/resources/"+mustAddr(t), nil)
	if r.status != 503 || !strings.Contains(string(r.body), `"code":5003`) {
		t.Errorf("node down: %d %s", r.status, r.body)
	}
}

func mustAddr(t *testing.T) string {
	k, err := tron.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.Address().String()
}
