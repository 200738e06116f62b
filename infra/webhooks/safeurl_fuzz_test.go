package webhooks

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"testing"

	"rental/schemas/apierr"
)

// noDNS answers every name with a public address, so the fuzzer explores parsing and
// address checks, not the network.
type noDNS struct{}

func (noDNS) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
}

// FuzzCheckURL: webhook URLs as clients register them. CheckURL never panics, refuses
// with 2010 only, and what it accepts is an absolute https URL without credentials whose
// literal host, if any, is not private.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://example.com/hook", "http://example.com/", "https://user:pw@example.com/",
		"https://127.0.0.1/", "https://[::1]/", "https://0x7f.1/", "https://2130706433/", "https://10.0.0.1:8443/x",
		"https://[fe80::1%25eth0]/", "https:///path", "https://example.com:99999/", "//example.com", "https://ex ample.com/", ""} {
		f.Add(s)
	}
	p := Policy{Resolver: noDNS{}}
	f.Fuzz(func(t *testing.T, raw string) {
		err := p.CheckURL(context.Background(), raw)
		if err != nil {
			var e *apierr.Error
			if !errors.As(err, &e) || e.Code != apierr.InvalidWebhookURL {
				t.Fatalf("CheckURL(%q) = %v, want 2010", raw, err)
			}
			return
		}
		u, perr := url.Parse(raw)
		if perr != nil || u.Scheme != "https" || u.User != nil || u.Host == "" {
			t.Fatalf("CheckURL accepted %q", raw)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && (a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified()) {
			t.Fatalf("CheckURL accepted the private target %q", raw)
		}
	})
}
