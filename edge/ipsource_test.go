package edge

import (
	"net/netip"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
)

func TestSourceOf(t *testing.T) {
	for _, c := range []struct {
		ip   string
		bits int
		want string
	}{
		{"203.0.113.7", 64, "ip4/203.0.113.7"},
		{"::ffff:203.0.113.7", 64, "ip4/203.0.113.7"},
		{"2001:db8:1:2:3:4:5:6", 64, "ip6/2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 48, "ip6/2001:db8:1::/48"},
		{"2001:db8:1:2:3:4:5:6", 128, "ip6/2001:db8:1:2:3:4:5:6/128"},
		{"fe80::1%eth0", 64, "ip6/fe80::/64"},
	} {
		if got := sourceOf(netip.MustParseAddr(c.ip), c.bits); got != c.want {
			t.Errorf("sourceOf(%s, %d) = %s, want %s", c.ip, c.bits, got, c.want)
		}
	}
}

// The per-IP budget counts an IPv6 /64 as one source (the review: anyone with a /64 had
// unlimited anonymous budget, including GET /v1/resources against the node): addresses of
// one /64 share it, another /64 and an IPv4 address have their own; with
// IPv6SourceBits 128 each address counts alone.
func TestPerIPBudgetAggregatesIPv6Networks(t *testing.T) {
	for _, bits := range []int{0, 128} { // 0: the default, /64
		env := newAuthEnv(t, authEnvOptions{
			limits: RateLimits{Order: 1000, Read: 1000, Management: 1000, IP: redis_rate.Limit{Rate: 3, Burst: 3, Period: time.Minute}},
			extra: func(o *Options) {
				o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
				o.IPv6SourceBits = bits
			}})
		get := func(src string) response {
			return env.ts.do(t, "GET", "/v1/status", "", "", "X-Forwarded-For", src)
		}
		for _, src := range []string{"2001:db8:7:8::1", "2001:db8:7:8::2", "2001:db8:7:8:ffff::3"} {
			if r := get(src); r.status != 200 {
				t.Fatalf("bits %d, %s: HTTP %d %s", bits, src, r.status, r.body)
			}
		}
		r := get("2001:db8:7:8::4")
		if bits == 128 {
			if r.status != 200 {
				t.Fatalf("/128: a fourth address of the /64 refused: HTTP %d", r.status)
			}
			continue
		}
		wantError(t, r, 429, 1100, "rate_limited", nil)
		for _, src := range []string{"2001:db8:7:9::1", "192.0.2.44"} {
			if r := get(src); r.status != 200 {
				t.Fatalf("%s: HTTP %d %s", src, r.status, r.body)
			}
		}
	}
}
