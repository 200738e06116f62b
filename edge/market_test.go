package edge

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rental/infra/accounts"
	"rental/infra/chainread"
	"rental/infra/marketstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/events"
	"rental/schemas/market"
	"rental/schemas/network"
)

// The market, resources and transfer-estimate tests run the real edge (key authentication,
// Postgres, Redis) with the three modules as the stages wire them: marketstore over the
// test database, chainread over the TRON simulator (HTTP) with its Redis cache, and the
// pricing snapshot of pricing_test.go.
type chainEnv struct {
	*authEnv
	sim      *tronsim.Sim
	market   *marketstore.Store
	staker   tron.Address // activated, stakes energy, holds 5 USDT
	holder   tron.Address // activated, holds 1 unit of USDT
	poor     tron.Address // activated, no USDT
	sender   tron.Address // activated, holds 100 USDT
	fresh    tron.Address // never seen on chain
	estimate accounts.CreatedKey
}

func newChainEnv(t *testing.T) *chainEnv {
	t.Helper()
	ce := &chainEnv{staker: randomAddress(t), holder: randomAddress(t), poor: randomAddress(t), sender: randomAddress(t), fresh: randomAddress(t)}
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile, Genesis: []tronsim.GenesisAccount{
		{Address: ce.staker, BalanceSun: 50_000_000, StakeEnergySun: 1_000_000_000, StakeBandwidthSun: 100_000_000, USDT: 5_000_000},
		{Address: ce.holder, BalanceSun: 2_000_000, USDT: 1},
		{Address: ce.poor, BalanceSun: 2_000_000},
		{Address: ce.sender, BalanceSun: 2_000_000, USDT: 100_000_000},
	}})
	if err != nil {
		t.Fatal(err)
	}
	node := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { node.Close(); _ = sim.Close() })
	ce.sim = sim
	rdb, prefix := testenv.Redis(t)
	reader, err := chainread.New(chainread.Options{Node: tron.NewClient(node.URL), Network: network.Nile, USDT: sim.USDTContract(),
		Redis: rdb, RedisPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	snaps := &fixedSnapshots{}
	snaps.set(buildSnapshot(t, testT0))

	base := newAuthEnv(t, authEnvOptions{skipServer: true})
	ce.market = marketstore.New(base.db.Pool, network.Nile)
	ce.authEnv = newAuthEnv(t, authEnvOptions{shareWith: base, extra: func(o *Options) {
		mk, err := NewMarket(MarketOptions{Store: ce.market, Fees: reader})
		if err != nil {
			t.Fatal(err)
		}
		res, err := NewResources(ResourcesOptions{Chain: reader, Orders: OrdersOnReceiver{Q: base.db.Pool}})
		if err != nil {
			t.Fatal(err)
		}
		est, err := NewTransferEstimates(EstimateOptions{Network: network.Nile, Snapshots: snaps, Chain: reader, USDT: sim.USDTContract()})
		if err != nil {
			t.Fatal(err)
		}
		o.Modules = append(o.Modules, mk, res, est)
	}})
	ce.estimate = ce.key(t, "estimates.read")
	return ce
}

func (ce *chainEnv) get(t *testing.T, path string) response {
	t.Helper()
	return ce.ts.do(t, "GET", path, "", "")
}

func (ce *chainEnv) sample(t *testing.T, slug string, at time.Time, price1h int64) {
	t.Helper()
	p := events.Centisun(price1h)
	e := int64(1_000_000)
	if _, err := ce.market.AddSample(context.Background(), market.Sample{Slug: slug, TS: at, Quote: market.Quote{PriceSun1h: &p, AvailableEnergy: &e}}, market.SampleEvery); err != nil {
		t.Fatal(err)
	}
}

func (ce *chainEnv) provider(t *testing.T, slug, name string) {
	t.Helper()
	var l market.Links
	_ = l.Set("site", "https://"+slug+".example")
	if err := ce.market.PutProvider(context.Background(), market.Provider{Slug: slug, Name: name, Kinds: []market.Kind{market.KindAPI}, Links: l, Enabled: true}, "test"); err != nil {
		t.Fatal(err)
	}
}

func TestMarketBoardRanksAndMarksStale(t *testing.T) {
	ce := newChainEnv(t)
	now := time.Now()
	for _, p := range [][2]string{{"tronrent", "TronRent"}, {"simcheap", "Sim Cheap"}, {"simmid", "Sim Mid"}, {"simflaky", "Sim Flaky"}, {"simnew", "Never sampled"}} {
		ce.provider(t, p[0], p[1])
	}
	ce.sample(t, "tronrent", now.Add(-time.Minute), 6_000)
	ce.sample(t, "simcheap", now.Add(-2*time.Minute), 4_550)
	ce.sample(t, "simmid", now.Add(-3*time.Minute), 7_025)
	ce.sample(t, "simflaky", now.Add(-20*time.Minute), 5_000) // stopped answering

	r := ce.get(t, "/v1/market")
	if r.status != 200 {
		t.Fatalf("GET /v1/market: %d %s", r.status, r.body)
	}
	for _, k := range []string{"as_of", "burn_sun", "providers", "summary"} {
		if _, ok := r.json[k]; !ok {
			t.Errorf("MarketBoard lacks %s: %s", k, r.body)
		}
	}
	if r.json["burn_sun"] != 100.0 {
		t.Errorf("burn_sun %v, want the simulator's getEnergyFee 100", r.json["burn_sun"])
	}
	rows := r.json["providers"].([]any)
	var order []string
	for _, x := range rows {
		order = append(order, x.(map[string]any)["slug"].(string))
	}
	if got := strings.Join(order, ","); got != "simcheap,simflaky,tronrent,simmid,simnew" {
		t.Fatalf("rows sorted by price_sun_1h, nulls last: %s", got)
	}
	row := func(i int) map[string]any { return rows[i].(map[string]any) }
	if c := row(0); c["rank"] != 1.0 || c["price_sun_1h"] != 45.5 || c["savings_pct"] != 0.55 || c["stale"] != false ||
		c["available_energy"] != 1_000_000.0 || c["total_energy"] != nil || c["price_sun_1d"] != nil || c["name"] != "Sim Cheap" {
		t.Errorf("cheapest row %v", c)
	}
	if l := row(0)["links"].(map[string]any); l["site"] != "https://simcheap.example" || l["telegram"] != nil || len(l) != 7 {
		t.Errorf("links %v", l)
	}
	if f := row(1); f["stale"] != true || f["rank"] != 2.0 || f["ts"] == nil {
		t.Errorf("a provider silent for 20 minutes is stale: %v", f)
	}
	if m := row(3); m["price_sun_1h"] != 70.25 || m["savings_pct"] != 0.3 || m["rank"] != 4.0 {
		t.Errorf("simmid %v", m)
	}
	if n := row(4); n["rank"] != nil || n["price_sun_1h"] != nil || n["ts"] != nil || n["stale"] != true || n["savings_pct"] != nil {
		t.Errorf("never sampled %v", n)
	}
	// Fresh rows only: (45.50 + 60 + 70.25) / 3 = 58.58.
	if s := r.json["summary"].(map[string]any); s["active_providers"] != 3.0 || s["avg_price_sun_1h"] != 58.58 {
		t.Errorf("summary %v", s)
	}
	// Public or key: a signed call gets the same board.
	if r := ce.signed(t, ce.key(t), "GET", "/v1/market", ""); r.status != 200 || len(r.json["providers"].([]any)) != 5 {
		t.Fatalf("signed GET /v1/market: %d %s", r.status, r.body)
	}
}

func TestMarketHistoryKnownUnknownAndBounds(t *testing.T) {
	ce := newChainEnv(t)
	now := time.Now()
	ce.provider(t, "simcheap", "Sim Cheap")
	ce.sample(t, "simcheap", now.Add(-30*time.Hour), 4_000)
	ce.sample(t, "simcheap", now.Add(-90*time.Minute), 4_100)
	ce.sample(t, "simcheap", now.Add(-10*time.Minute), 4_200)

	r := ce.get(t, "/v1/market/history?slug=simcheap")
	if r.status != 200 || r.json["slug"] != "simcheap" || r.json["hours"] != float64(market.DefaultHistoryHours) {
		t.Fatalf("history: %d %s", r.status, r.body)
	}
	pts := r.json["points"].([]any)
	if len(pts) != 2 {
		t.Fatalf("default window is 24 h: %s", r.body)
	}
	p0, p1 := pts[0].(map[string]any), pts[1].(map[string]any)
	if p0["price_sun_1h"] != 41.0 || p1["price_sun_1h"] != 42.0 || p0["available_energy"] != 1_000_000.0 {
		t.Errorf("points oldest first: %s", r.body)
	}
	for _, k := range []string{"ts", "price_sun_1h", "price_sun_1d", "available_energy"} {
		if _, ok := p0[k]; !ok {
			t.Errorf("point lacks %s", k)
		}
	}
	if r := ce.get(t, "/v1/market/history?slug=simcheap&hours=48"); len(r.json["points"].([]any)) != 3 {
		t.Errorf("hours=48: %s", r.body)
	}
	if r := ce.get(t, "/v1/market/history?slug=simcheap&hours=1"); len(r.json["points"].([]any)) != 1 {
		t.Errorf("hours=1: %s", r.body)
	}
	for _, slug := range []string{"nobody", "Not%20A%20Slug"} {
		r := ce.get(t, "/v1/market/history?slug="+slug)
		if r.status != 200 || r.body == nil || !strings.Contains(string(r.body), `"points":[]`) {
			t.Errorf("unknown slug %s gives an empty array: %d %s", slug, r.status, r.body)
		}
	}
	wantError(t, ce.get(t, "/v1/market/history"), 400, 2001, "validation_failed", "slug")
	for _, h := range []string{"0", "721", "abc", "1.5", "-3"} {
		e := wantError(t, ce.get(t, "/v1/market/history?slug=simcheap&hours="+h), 400, 2001, "validation_failed", "hours")
		if d := e["details"].(map[string]any); d["constraint"] != "range" || d["max"] != float64(market.MaxHistoryHours) {
			t.Errorf("hours=%s details %v", h, d)
		}
	}
}

func (ce *chainEnv) insertOrder(t *testing.T, accountID, receiver, status string, amount int64, expires time.Time) string {
	t.Helper()
	id := fmt.Sprintf("ord_test%d", time.Now().UnixNano())
	_, err := ce.db.Pool.Exec(context.Background(), `INSERT INTO orders (id, account_id, network, client_order_id, status,
		resource, amount, tier, receiver, unit_price_centi, energy_amount_sun, total_amount_sun, charged_amount_sun, expires_at)
		VALUES ($1, $2, 'nile', $1, $3, 'energy', $4::bigint, '1h', $5, 6000, $4::bigint * 60, $4::bigint * 60, $4::bigint * 60, $6)`,
		id, accountID, status, amount, receiver, expires)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestResourcesActivatedNewAndOwnOrders(t *testing.T) {
	ce := newChainEnv(t)
	r := ce.get(t, "/v1/resources/"+ce.staker.String())
	if r.status != 200 {
		t.Fatalf("GET resources: %d %s", r.status, r.body)
	}
	j := r.json
	for _, k := range []string{"address", "activated", "balance_sun", "holds_usdt", "energy", "bandwidth", "our_active_orders", "as_of"} {
		if _, ok := j[k]; !ok {
			t.Errorf("AddressResources lacks %s: %s", k, r.body)
		}
	}
	if j["address"] != ce.staker.String() || j["activated"] != true || j["balance_sun"] != 50_000_000.0 || j["holds_usdt"] != true {
		t.Errorf("activated address %s", r.body)
	}
	en, bw := j["energy"].(map[string]any), j["bandwidth"].(map[string]any)
	if en["limit"].(float64) <= 0 || en["available"] != en["limit"].(float64)-en["used"].(float64) || en["delegated_in"] != 0.0 {
		t.Errorf("energy %v", en)
	}
	if bw["free_net_limit"].(float64) <= 0 || bw["limit"].(float64) <= bw["free_net_limit"].(float64) || bw["available"] != bw["limit"].(float64)-bw["used"].(float64) {
		t.Errorf("bandwidth %v", bw)
	}
	if o := j["our_active_orders"].([]any); len(o) != 0 {
		t.Errorf("anonymous caller gets an empty list: %v", o)
	}

	r = ce.get(t, "/v1/resources/"+ce.fresh.String())
	if r.status != 200 || r.json["activated"] != false || r.json["balance_sun"] != 0.0 || r.json["holds_usdt"] != false ||
		r.json["energy"].(map[string]any)["limit"] != 0.0 {
		t.Errorf("never-activated address: %d %s", r.status, r.body)
	}

	// The caller's own live orders on the address, and only those.
	live := ce.insertOrder(t, ce.acct.ID, ce.holder.String(), "active", 65_000, time.Now().Add(time.Hour))
	ce.insertOrder(t, ce.acct.ID, ce.holder.String(), "expired", 70_000, time.Now().Add(-time.Hour))
	ce.insertOrder(t, ce.acct.ID, ce.poor.String(), "active", 80_000, time.Now().Add(time.Hour))
	other := ce.newAccount(t)
	ce.insertOrder(t, other.ID, ce.holder.String(), "active", 90_000, time.Now().Add(time.Hour))

	r = ce.signed(t, ce.key(t), "GET", "/v1/resources/"+ce.holder.String(), "")
	os := r.json["our_active_orders"].([]any)
	if r.status != 200 || len(os) != 1 {
		t.Fatalf("own orders: %d %s", r.status, r.body)
	}
	if o := os[0].(map[string]any); o["order_id"] != live || o["amount"] != 65_000.0 || o["resource"] != "energy" || o["expires_at"] == nil {
		t.Errorf("order entry %v", o)
	}
	if r := ce.get(t, "/v1/resources/"+ce.holder.String()); len(r.json["our_active_orders"].([]any)) != 0 {
		t.Errorf("anonymous: %s", r.body)
	}
	k2 := ce.keyFor(t, other.ID, accounts.NewKey{})
	if r := ce.signed(t, k2, "GET", "/v1/resources/"+ce.poor.String(), ""); len(r.json["our_active_orders"].([]any)) != 0 {
		t.Errorf("another account's orders are not listed: %s", r.body)
	}

	for _, bad := range []string{"Tnot-an-address", ce.staker.Hex(), ce.staker.String()[:33] + "x", "T" + strings.Repeat("1", 33)} {
		wantError(t, ce.get(t, "/v1/resources/"+bad), 400, 2007, "invalid_address", "address")
	}

	// The node down: an address read within the cache time (3 s) is still served from the
	// cache, another is 5003.
	before := ce.get(t, "/v1/resources/"+ce.sender.String())
	if _, err := ce.sim.InjectFault(tronsim.FaultNodeDown, 1000, 0); err != nil {
		t.Fatal(err)
	}
	if r := ce.get(t, "/v1/resources/"+ce.sender.String()); r.status != 200 || r.json["as_of"] != before.json["as_of"] {
		t.Errorf("cached address with the node down: %d %s", r.status, r.body)
	}
	e := wantError(t, ce.get(t, "/v1/resources/"+randomAddress(t).String()), 503, 5003, "chain_unavailable", nil)
	if e["retryable"] != true {
		t.Errorf("5003 is retryable: %v", e)
	}
}

func (ce *chainEnv) transfer(t *testing.T, body string) response {
	t.Helper()
	return ce.signed(t, ce.estimate, "POST", "/v1/estimate/transfer", body)
}

func TestEstimateTransferToHolderAndFirstTimeHolder(t *testing.T) {
	ce := newChainEnv(t)
	usdt := ce.sim.USDTContract().String()
	r := ce.transfer(t, fmt.Sprintf(`{"from_address":%q,"to_address":%q,"amount":"2500000"}`, ce.sender, ce.holder))
	if r.status != 200 {
		t.Fatalf("estimate: %d %s", r.status, r.body)
	}
	j := r.json
	for _, k := range []string{"from_address", "to_address", "contract_address", "recipient_holds_token", "energy_required", "recommended_amount",
		"bandwidth_required", "tier", "price_sun_per_unit", "energy_amount_sun", "activate_amount_sun", "total_amount_sun", "burn_alternative_sun", "as_of"} {
		if _, ok := j[k]; !ok {
			t.Errorf("TransferEstimate lacks %s", k)
		}
	}
	holderEnergy := float64(tronsim.EnergyUSDTTransferToHolder)
	rec := float64((tronsim.EnergyUSDTTransferToHolder*11 + 9) / 10) // +10 %, rounded up
	if j["contract_address"] != usdt || j["recipient_holds_token"] != true || j["energy_required"] != holderEnergy ||
		j["recommended_amount"] != rec || j["tier"] != "1h" || j["price_sun_per_unit"] != 60.0 ||
		j["energy_amount_sun"] != rec*60 || j["activate_amount_sun"] != 0.0 || j["total_amount_sun"] != rec*60 ||
		j["burn_alternative_sun"] != holderEnergy*100 {
		t.Errorf("to a holder: %s", r.body)
	}
	if bw := j["bandwidth_required"].(float64); bw < 250 || bw > 400 {
		t.Errorf("bandwidth_required %v", bw)
	}

	// A first-time holder that is not activated either: about twice the energy, plus the
	// activation fee.
	r = ce.transfer(t, fmt.Sprintf(`{"from_address":%q,"to_address":%q,"contract_address":%q,"amount":null,"tier":"1h"}`, ce.sender, ce.fresh, usdt))
	j = r.json
	newEnergy := float64(tronsim.EnergyUSDTTransferToNew)
	if r.status != 200 || j["recipient_holds_token"] != false || j["energy_required"] != newEnergy || j["tier"] != "1h" ||
		j["activate_amount_sun"] != float64(testActivationSun) || j["total_amount_sun"] != j["energy_amount_sun"].(float64)+testActivationSun ||
		j["burn_alternative_sun"] != newEnergy*100 {
		t.Fatalf("to a first-time holder: %d %s", r.status, r.body)
	}
	if ratio := newEnergy / holderEnergy; ratio < 1.8 || ratio > 2.2 {
		t.Errorf("first-time holder costs %.2fx", ratio)
	}

	// The sender cannot cover the amount: the documented fallback figure.
	r = ce.transfer(t, fmt.Sprintf(`{"from_address":%q,"to_address":%q,"amount":"1000"}`, ce.poor, ce.holder))
	if r.status != 200 || r.json["energy_required"] != float64(chainread.DefaultFallback.ToHolder) {
		t.Errorf("fallback: %d %s", r.status, r.body)
	}
}

func TestEstimateTransferErrors(t *testing.T) {
	ce := newChainEnv(t)
	from, to := ce.sender.String(), ce.holder.String()
	body := func(f, tt, extra string) string {
		return fmt.Sprintf(`{"from_address":%q,"to_address":%q%s}`, f, tt, extra)
	}
	wantError(t, ce.transfer(t, body("T123", to, "")), 400, 2007, "invalid_address", "from_address")
	wantError(t, ce.transfer(t, body(from, ce.holder.Hex(), "")), 400, 2007, "invalid_address", "to_address")
	wantError(t, ce.transfer(t, body(from, to, `,"contract_address":"Tbad"`)), 400, 2007, "invalid_address", "contract_address")
	e := wantError(t, ce.transfer(t, body(from, to, fmt.Sprintf(`,"contract_address":%q`, ce.poor))), 422, 2011, "unsupported_contract", "contract_address")
	if d := e["details"].(map[string]any); len(d["supported"].([]any)) != 1 {
		t.Errorf("2011 details %v", d)
	}
	wantError(t, ce.transfer(t, fmt.Sprintf(`{"from_address":%q}`, from)), 400, 2001, "validation_failed", "to_address")
	for _, a := range []string{`"-5"`, `"1.5"`, `"1e6"`, `""`, `"` + strings.Repeat("9", 79) + `"`} {
		wantError(t, ce.transfer(t, body(from, to, `,"amount":`+a)), 400, 2001, "validation_failed", "amount")
	}
	wantError(t, ce.transfer(t, body(from, to, `,"tier":"2h"`)), 400, 2001, "validation_failed", "tier")
	wantError(t, ce.transfer(t, body(from, to, `,"tier":"1d"`)), 422, 2003, "tier_unavailable", "tier")

	// A transfer the node says reverts (to the zero address) is not priced.
	zero, _ := tron.AddressFromBytes(make([]byte, 20))
	e = wantError(t, ce.transfer(t, body(from, zero.String(), `,"amount":"1"`)), 400, 2001, "validation_failed", nil)
	if d := e["details"].(map[string]any); d["constraint"] != "transfer_reverts" || d["energy_used"].(float64) <= 0 {
		t.Errorf("revert details %v", d)
	}

	// A key without estimates.read, and no key at all.
	if r := ce.signed(t, ce.key(t, "orders.read"), "POST", "/v1/estimate/transfer", body(from, to, "")); r.status != 403 {
		t.Errorf("scope: %d %s", r.status, r.body)
	}
	wantError(t, ce.ts.do(t, "POST", "/v1/estimate/transfer", "application/json", body(from, to, "")), 401, 1001, "missing_credentials", nil)

	if _, err := ce.sim.InjectFault(tronsim.FaultNodeDown, 1000, 0); err != nil {
		t.Fatal(err)
	}
	wantError(t, ce.transfer(t, body(from, to, "")), 503, 5003, "chain_unavailable", nil)
}
