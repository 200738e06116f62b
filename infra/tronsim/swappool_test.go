package tronsim

import (
	"context"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"testing"

	"rental/infra/tron"
)

// The pool's oracle, read through the real node client over HTTP. The expected figures
// were computed independently (Python's decimal module at 120 digits):
//
//	tick(p)  = floor(log_1.0001(p)): 3.4 -> 12238, 34 -> 35265, 1/3.4 -> -12239, 1/34 -> -35266
//	sqrtX96  = floor(sqrt(p) * 2**96): 3.4 -> 146089513313977176097712150387,
//	           1/3.4 -> 42967503915875640028738867761
//
// and the cumulatives by hand from the timeline below (blocks 3 s apart, the pool created
// at block 0 at time G): 3.4 until the swap block 21 (G+63 s), 34 for block 21 only, 3.4
// again from block 22 (G+66 s); read at block 40 (G+120) and at the solidified block 35
// (SolidLag 5, G+105):
//
//	now(40)  = t(3.4)*63 + t(34)*3 + t(3.4)*54     then(40, 60 s ago) = t(3.4)*60
//	now(35)  = t(3.4)*63 + t(34)*3 + t(3.4)*39     then(35, 60 s ago) = t(3.4)*45
func TestSwapPoolOracleMatchesIndependentFigures(t *testing.T) {
	low, _ := tron.AddressFromBytes(append(make([]byte, 19), 1)) // sorts below WTRX: USDT is token0
	high, _ := tron.AddressFromBytes(bytesOf(0xff, 20))          // sorts above WTRX: USDT is token1
	for _, c := range []struct {
		name                               string
		usdt                               tron.Address
		sqrt                               string
		tickNow                            int64
		headNow, headThen, solNow, solThen int64
	}{
		{"USDT token0", low, "146089513313977176097712150387", 12238, 1537641, 734280, 1354071, 550710},
		{"USDT token1", high, "42967503915875640028738867761", -12239, -1537761, -734340, -1354176, -550755},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Options{USDTContract: c.usdt, SolidLag: 5})
			node := tron.NewClient(h.url)
			ctx := context.Background()
			var info map[string]any
			h.do(http.MethodGet, "/sim/info", nil, &info)
			if info["swap_pool"] != SwapPoolContract().String() || info["wtrx_contract"] != WTRXContract().String() {
				t.Fatalf("/sim/info %v", info)
			}
			call := func(solid bool, data []byte) *tron.TransactionExtention {
				t.Helper()
				q := &tron.TriggerSmartContract{OwnerAddress: h.sim.FaucetAddress(), ContractAddress: SwapPoolContract(), Data: data}
				var ext *tron.TransactionExtention
				var err error
				if solid {
					ext, err = node.TriggerConstantContractSolid(ctx, q)
				} else {
					ext, err = node.TriggerConstantContract(ctx, q)
				}
				if err != nil {
					t.Fatal(err)
				}
				return ext
			}
			t0, _ := tron.DecodeAddressResult(call(false, tron.SelectorToken0).ConstantResult[0])
			t1, _ := tron.DecodeAddressResult(call(false, tron.SelectorToken1).ConstantResult[0])
			if (c.usdt == low) != (t0 == c.usdt && t1 == WTRXContract()) || (c.usdt == high) != (t1 == c.usdt && t0 == WTRXContract()) {
				t.Fatalf("token0 %s token1 %s", t0, t1)
			}
			// Block 0 to 20 at 3.4; 34 for block 21; 3.4 again from block 22.
			h.sim.Mine(20)
			if st := h.do(http.MethodPost, "/sim/swap", PoolChange{TRXPerUSDT: "34"}, nil); st != http.StatusOK {
				t.Fatalf("POST /sim/swap: %d", st)
			}
			h.sim.Mine(1)
			h.do(http.MethodPost, "/sim/swap", PoolChange{TRXPerUSDT: "3.4"}, nil)
			h.sim.Mine(19)

			sqrt, tick, err := tron.DecodeSlot0(call(false, tron.SelectorSlot0).ConstantResult[0])
			if err != nil || sqrt.String() != c.sqrt || int64(tick) != c.tickNow {
				t.Fatalf("slot0 = %s, %d, %v; want %s, %d", sqrt, tick, err, c.sqrt, c.tickNow)
			}
			for _, v := range []struct {
				solid     bool
				now, then int64
			}{{false, c.headNow, c.headThen}, {true, c.solNow, c.solThen}} {
				cum, err := tron.DecodeObserve(call(v.solid, tron.ObserveData(60, 0)).ConstantResult[0], 2)
				if err != nil || cum[0] != v.then || cum[1] != v.now {
					t.Errorf("observe([60, 0]) solid=%v = %v, %v; want [%d %d]", v.solid, cum, err, v.then, v.now)
				}
			}
			// 200 s before block 40 is before the pool existed: Error("OLD").
			ext := call(false, tron.ObserveData(200))
			if !ext.Reverted() || tron.RevertReason(ext.ConstantResult[0]) != "OLD" {
				t.Errorf("observe([200]) answered %+v", ext)
			}
			// triggersmartcontract runs a view as a constant call, as java-tron does.
			var raw struct {
				ConstantResult []string `json:"constant_result"`
			}
			h.wallet("/wallet/triggersmartcontract", map[string]any{"owner_address": h.sim.FaucetAddress().String(),
				"contract_address": SwapPoolContract().String(), "function_selector": "liquidity()", "visible": true}, &raw)
			if len(raw.ConstantResult) != 1 || raw.ConstantResult[0] != hex.EncodeToString(uint256(DefaultPoolLiquidity)) {
				t.Errorf("liquidity() through triggersmartcontract: %+v", raw)
			}
		})
	}
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

func TestSwapPoolControlAPIAndPersistence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "chain.json")
	h := newHarness(t, Options{DataFile: file})
	for _, bad := range []map[string]any{{"trx_per_usdt": "0"}, {"trx_per_usdt": "abc"}, {"trx_per_usdt": "1e60"},
		{"trx_per_usdt": "3", "liquidity": "-1"}, {"trx_per_usdt": "3", "surprise": 1}} {
		if st := h.do(http.MethodPost, "/sim/swap", bad, nil); st != http.StatusBadRequest {
			t.Errorf("POST /sim/swap %v: %d, want 400", bad, st)
		}
	}
	var st PoolState
	h.do(http.MethodPost, "/sim/swap", PoolChange{TRXPerUSDT: "2.5", Liquidity: "123"}, &st)
	if st.Block != 1 || st.TRXPerUSDT != "2.500000" || st.Liquidity != "123" {
		t.Fatalf("POST /sim/swap answered %+v", st)
	}
	// It takes effect with the next block, not before.
	if got := h.sim.SwapPool(); got.TRXPerUSDT != "3.400000" {
		t.Fatalf("before the next block the pool says %+v", got)
	}
	h.sim.Mine(2)
	before := h.sim.SwapPool()
	if before.TRXPerUSDT != "2.500000" || before.Liquidity != "123" {
		t.Fatalf("after the block the pool says %+v", before)
	}
	h.sim.Close()
	again, err := New(Options{DataFile: file, GenesisTime: testGenesis})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := again.SwapPool(); got != before {
		t.Fatalf("after a restart the pool says %+v, want %+v", got, before)
	}
}

// FuzzSwapPoolCallData sends arbitrary call data to the pool: it answers or reverts, never
// panics.
func FuzzSwapPoolCallData(f *testing.F) {
	f.Add(tron.ObserveData(60, 0))
	f.Add(append(append([]byte(nil), tron.SelectorObserve...), bytesOf(0xff, 64)...))
	f.Add(append([]byte(nil), tron.SelectorSlot0...))
	f.Add([]byte{1, 2})
	sim, err := New(Options{GenesisTime: testGenesis})
	if err != nil {
		f.Fatal(err)
	}
	defer sim.Close()
	sim.Mine(30)
	f.Fuzz(func(t *testing.T, data []byte) {
		sim.poolCall(SwapPoolContract(), data, false)
		sim.poolCall(WTRXContract(), data, true)
	})
}
