package deposits

import (
	"context"
	"math/big"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/ledger"
)

// poolSim is the node simulator with its swap pool behind a real HTTP server.
type poolSim struct {
	sim *tronsim.Sim
	url string
}

func newPoolSim(t *testing.T) *poolSim {
	t.Helper()
	sim, err := tronsim.New(tronsim.Options{SolidLag: 2, GenesisTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); sim.Close() })
	return &poolSim{sim: sim, url: srv.URL}
}

func (p *poolSim) source(t *testing.T, usdt tron.Address, maxGapBps int64, reg prometheus.Registerer) *PoolRate {
	t.Helper()
	var m *RateMetrics
	if reg != nil {
		m = NewRateMetrics(reg)
	}
	r, err := NewPoolRate(PoolRateOptions{Node: tron.NewClient(p.url), Pool: tronsim.SwapPoolContract(), USDT: usdt,
		WTRX: tronsim.WTRXContract(), Window: time.Minute, Metrics: m,
		Guards: ledger.PoolGuards{MinLiquidity: big.NewInt(1_000_000_000_000), MaxGapBps: maxGapBps}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (p *poolSim) swap(t *testing.T, c tronsim.PoolChange) {
	t.Helper()
	if _, err := p.sim.Swap(c); err != nil {
		t.Fatal(err)
	}
}

func gauge(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
				}
				if !found {
					continue next
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s %v", name, labels)
	return 0
}

// The simulator's USDT sorts above its WTRX, so USDT is token1 and the pool's price is
// USDT per WTRX. Expected SUN figures (Python decimal, 120 digits; see schemas/ledger's
// tests for the formulas): at 3.4 TRX per USDT spot 3400000 and mean 3400215; at 3.5 spot
// 3500000 and mean 3500260.
func TestPoolRateAtTheSolidifiedBlockWithItsGuards(t *testing.T) {
	ps := newPoolSim(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	guarded := ps.source(t, ps.sim.USDTContract(), 200, reg)
	unguarded := ps.source(t, ps.sim.USDTContract(), 1<<40, nil) // the gap guard off: min(spot, mean) alone

	// The pool was created at block 0: its observations do not reach back a minute yet.
	if _, ok, err := guarded.Rate(ctx); ok || err != nil {
		t.Fatalf("a fresh pool gave a rate (%v)", err)
	}
	if gauge(t, reg, "rental_usdt_rate_unavailable", "reason", ledger.NoRateWindow) != 1 {
		t.Error("rental_usdt_rate_unavailable{reason=window_not_covered} is not 1")
	}
	// 22 blocks: the solidified block 20 is 60 s after the pool's creation.
	ps.sim.Mine(22)
	r, ok, err := guarded.Rate(ctx)
	if !ok || err != nil || r.SunPerUSDT != 3_400_000 || r.Source != "sunswap_v3@20" ||
		!r.At.Equal(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)) {
		t.Fatalf("rate %+v, %v, %v; want 3400000 SUN from sunswap_v3@20 at 00:01:00", r, ok, err)
	}
	if gauge(t, reg, "rental_usdt_rate_sun") != 3_400_000 || gauge(t, reg, "rental_usdt_rate_spot_gap_bps") != 1 ||
		gauge(t, reg, "rental_usdt_rate_unavailable", "reason", ledger.NoRateWindow) != 0 {
		t.Error("the metrics do not show the rate")
	}

	// Ten times the price for block 23 alone. At no solidified block does either source
	// credit more than 1% above 3.4 TRX: at the spike block the mean is still 3.4, and
	// afterwards the spot is; the guarded source gives no rate while spot and mean differ by
	// more than 2%.
	ps.swap(t, tronsim.PoolChange{TRXPerUSDT: "34"})
	ps.sim.Mine(1)
	ps.swap(t, tronsim.PoolChange{TRXPerUSDT: "3.4"})
	sawGapGuard := false
	for solid := int64(22); solid <= 46; solid++ {
		ps.sim.Mine(1) // head solid+2
		for _, src := range []*PoolRate{guarded, unguarded} {
			r, ok, err := src.Rate(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok && (r.SunPerUSDT > 3_434_000 || r.SunPerUSDT < 3_366_000 || !strings.HasSuffix(r.Source, "@"+itoa(solid))) {
				t.Errorf("solidified block %d: rate %+v", solid, r)
			}
			if src == unguarded && !ok {
				t.Errorf("solidified block %d: the unguarded source gave no rate", solid)
			}
			if src == guarded && !ok {
				sawGapGuard = true
				if gauge(t, reg, "rental_usdt_rate_unavailable", "reason", ledger.NoRateGap) != 1 {
					t.Errorf("solidified block %d: no rate, but not for the gap", solid)
				}
			}
		}
	}
	if !sawGapGuard {
		t.Error("the gap guard never held the rate back around the spike")
	}

	// A real move to 3.5 is followed once the window has passed.
	ps.swap(t, tronsim.PoolChange{TRXPerUSDT: "3.5"})
	ps.sim.Mine(25)
	if r, ok, _ := guarded.Rate(ctx); !ok || r.SunPerUSDT != 3_500_000 {
		t.Errorf("after a minute at 3.5: %+v, %v", r, ok)
	}

	// Liquidity below the floor.
	ps.swap(t, tronsim.PoolChange{TRXPerUSDT: "3.5", Liquidity: "999999999999"})
	ps.sim.Mine(3)
	if _, ok, _ := guarded.Rate(ctx); ok || gauge(t, reg, "rental_usdt_rate_unavailable", "reason", ledger.NoRateLiquidity) != 1 {
		t.Error("a thin pool gave a rate")
	}
	if gauge(t, reg, "rental_usdt_rate_reads_total", "result", "ok") < 2 {
		t.Error("rental_usdt_rate_reads_total{result=ok} did not count")
	}
}

func itoa(n int64) string { return big.NewInt(n).String() }

func TestPoolRateRefusesAnotherPoolAndAnUnreachableNode(t *testing.T) {
	ps := newPoolSim(t)
	ps.sim.Mine(30)
	ctx := context.Background()
	// A pool whose tokens are not USDT_CONTRACT and WTRX: no rate, whatever its price.
	other := ps.source(t, tronsim.DeepReserveContract(), 200, nil)
	if _, ok, err := other.Rate(ctx); ok || err != nil {
		t.Errorf("a pool of other tokens: ok %v, err %v", ok, err)
	}
	// A node that does not answer: no rate, and no error (the deposit is held).
	srv := httptest.NewServer(nil)
	srv.Close()
	down, _ := NewPoolRate(PoolRateOptions{Node: tron.NewClient(srv.URL, tron.WithTimeout(time.Second)), Pool: tronsim.SwapPoolContract(),
		USDT: ps.sim.USDTContract(), WTRX: tronsim.WTRXContract(), Window: time.Minute, Guards: ledger.PoolGuards{MaxGapBps: 200}})
	if _, ok, err := down.Rate(ctx); ok || err != nil {
		t.Errorf("an unreachable node: ok %v, err %v", ok, err)
	}
	// The caller's own cancellation is an error, not "no rate".
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := ps.source(t, ps.sim.USDTContract(), 200, nil).Rate(cctx); err == nil {
		t.Error("a cancelled read answered without an error")
	}
}
