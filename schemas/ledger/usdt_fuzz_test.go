package ledger

import (
	"strings"
	"testing"
)

// FuzzParseUSDT: USDT decimal strings (deposit limits, amounts in facts). Whatever parses
// is non-negative and formats to a string that parses back to the same units.
func FuzzParseUSDT(f *testing.F) {
	for _, s := range []string{"5", "2000", "12.5", "0.000001", "0.0000001", "-1", "+1", "1e6", ".5", "5.", "", "00012.340000", "1 ", "١٢"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseUSDT(s)
		if err != nil {
			return
		}
		if v.Sign() < 0 {
			t.Fatalf("ParseUSDT(%q) = %v", s, v)
		}
		out := FormatUSDT(v)
		back, err := ParseUSDT(out)
		if err != nil || back.Cmp(v) != 0 {
			t.Fatalf("ParseUSDT(%q) = %v, formatted %q, read back %v (%v)", s, v, out, back, err)
		}
		if strings.ContainsAny(out, "+- e") {
			t.Fatalf("FormatUSDT gave %q", out)
		}
	})
}
