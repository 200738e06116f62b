package tron

import (
	"encoding/hex"
	"strings"
	"testing"
)

func TestPoolSelectorsAreTheV3Ones(t *testing.T) {
	// The well-known 4-byte selectors of UniswapV3Pool's and TRC-20's view functions.
	for got, want := range map[string]string{
		hex.EncodeToString(SelectorSlot0):     "3850c7bd",
		hex.EncodeToString(SelectorObserve):   "883bdbfd",
		hex.EncodeToString(SelectorLiquidity): "1a686502",
		hex.EncodeToString(SelectorToken0):    "0dfe1681",
		hex.EncodeToString(SelectorToken1):    "d21220a7",
		hex.EncodeToString(SelectorDecimals):  "313ce567",
		hex.EncodeToString(selectorError):     "08c379a0",
	} {
		if got != want {
			t.Errorf("selector %s, want %s", got, want)
		}
	}
}

func words(ws ...string) string {
	var b strings.Builder
	for _, w := range ws {
		b.WriteString(strings.Repeat("0", 64-len(w)) + w)
	}
	return b.String()
}

const minus1 = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"

func TestObserveDataAndAnswers(t *testing.T) {
	if got := hex.EncodeToString(ObserveData(1800, 0)); got != "883bdbfd"+words("20", "2", "708", "0") {
		t.Errorf("ObserveData(1800, 0) = %s", got)
	}
	// observe([60, 0]) answering tick cumulatives -5 and 743040 (12384 x 60).
	ans := words("40", "a0", "2", "fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffb", "b5680", "2", "1", "2")
	got, err := DecodeObserve(ans, 2)
	if err != nil || got[0] != -5 || got[1] != 743040 {
		t.Fatalf("DecodeObserve = %v, %v", got, err)
	}
	for name, bad := range map[string]string{
		"wrong length":        words("40", "a0", "1", "5", "1", "1"),
		"offset out":          words("4000", "a0", "2", "5", "6", "2", "1", "2"),
		"int56 out of range":  words("40", "a0", "2", "100000000000000", "1", "2", "1", "2"),
		"not whole words":     ans + "00",
		"second array absent": words("40", "1000", "2", "1", "2"),
	} {
		if _, err := DecodeObserve(bad, 2); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// slot0: sqrtPriceX96 of 3.45 and tick -12385 (token order reversed), then five more words.
	s0 := words("1db7fb7a43d09d041d38ab22c", minus1[:64-4]+"cf9f", "0", "1", "1", "0", "1")
	p, tick, err := DecodeSlot0(s0)
	if err != nil || tick != -12385 || p.Text(16) != "1db7fb7a43d09d041d38ab22c" {
		t.Fatalf("DecodeSlot0 = %v, %d, %v", p, tick, err)
	}
	if _, _, err := DecodeSlot0(s0[:64*6]); err == nil {
		t.Error("a six-word slot0 accepted")
	}
	// Error("OLD"), the revert data of an observation older than the pool's oldest.
	if r := RevertReason("08c379a0" + words("20", "3") + "4f4c44" + strings.Repeat("0", 58)); r != "OLD" {
		t.Errorf("RevertReason = %q", r)
	}
	if r := RevertReason(words("1")); r != "" {
		t.Errorf("RevertReason of a plain word = %q", r)
	}
}

// FuzzPoolAnswers feeds arbitrary constant_result text to the pool decoders: they return
// an error or a value, never panic.
func FuzzPoolAnswers(f *testing.F) {
	f.Add(words("40", "a0", "2", "5", "6", "2", "1", "2"))
	f.Add(words("1db7fb7a43d09d041d38ab22c", "3060", "0", "1", "1", "0", "1"))
	f.Add("08c379a0" + words("20", "3") + "4f4c44")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = DecodeObserve(s, 2)
		_, _, _ = DecodeSlot0(s)
		_, _ = DecodeAddressResult(s)
		_ = RevertReason(s)
	})
}
