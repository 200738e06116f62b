package accounts

import (
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"

	"rental/schemas/network"
)

// FuzzValidKeyID: an X-API-KEY header is outside input. ValidKeyID accepts exactly the
// ids newCredentials makes (the prefix of the network and 32 lowercase hex characters),
// whatever else arrives.
func FuzzValidKeyID(f *testing.F) {
	id, _ := newCredentials(network.Nile)
	for _, s := range []string{id, "ak_test_", "ak_live_" + strings.Repeat("0", 32), "ak_test_" + strings.Repeat("A", 32),
		"ak_test_" + strings.Repeat("a", 33), "ak_test_" + strings.Repeat("g", 32), strings.Repeat("a", 16<<10), ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ok := ValidKeyID(network.Nile, s)
		rest, hasPrefix := strings.CutPrefix(s, network.Nile.KeyIDPrefix())
		raw, err := hex.DecodeString(rest)
		want := hasPrefix && err == nil && len(raw) == 16 && hex.EncodeToString(raw) == rest
		if ok != want {
			t.Fatalf("ValidKeyID(%q) = %v, want %v", s, ok, want)
		}
	})
}

func TestAllowlistWithin(t *testing.T) {
	p := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, c := range []struct {
		allow, outer []netip.Prefix
		want         bool
	}{
		{nil, nil, true},
		{p("10.0.0.1/32"), nil, true},
		{nil, p("10.0.0.0/8"), false}, // any address is wider than a list
		{p("10.1.0.0/16", "10.2.3.4/32"), p("10.0.0.0/8"), true},
		{p("10.0.0.0/7"), p("10.0.0.0/8"), false},
		{p("11.0.0.1/32"), p("10.0.0.0/8"), false},
		{p("2001:db8::/48"), p("2001:db8::/32"), true},
		{p("2001:db8::/48"), p("10.0.0.0/8"), false},
	} {
		if got := AllowlistWithin(c.allow, c.outer); got != c.want {
			t.Errorf("AllowlistWithin(%v, %v) = %v, want %v", c.allow, c.outer, got, c.want)
		}
	}
}
