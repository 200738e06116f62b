package webhooks

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"code.dny.dev/ssrf"

	"rental/schemas/apierr"
)

// MaxURLLength is the spec's limit on an endpoint URL.
const MaxURLLength = 2048

// Policy is what webhook targets may be. The zero value is production: HTTPS only, public
// unicast addresses only (code.dny.dev/ssrf's deny lists: private, loopback, link-local,
// CGNAT, multicast, documentation and reserved ranges of IPv4; everything outside IPv6
// global unicast, which takes in ::1, fe80::/10, fc00::/7, IPv4-mapped ::ffff:0:0/96 and
// the cloud metadata addresses 169.254.169.254 and fd00:ec2::254).
type Policy struct {
	// AllowLoopback (WEBHOOK_ALLOW_LOOPBACK; dev stack and tests only) also admits plain
	// http:// URLs and the loopback targets 127.0.0.0/8 and ::1. Every other private range
	// stays refused.
	AllowLoopback bool
	// Resolver looks host names up at registration; nil is net.DefaultResolver. Tests put
	// a resolver answering private addresses here.
	Resolver interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	}
	// TLS is the client TLS configuration (tests trust their httptest CA here); nil is the
	// system roots.
	TLS *tls.Config
	// Ports are the target ports allowed besides 443 (WEBHOOK_PORTS), checked at
	// registration and at every dial: the test call returns the first 512 bytes of the
	// answer, so any port would make it a banner-reading probe of any public host.
	// AllowLoopback admits any port (local receivers listen on ephemeral ports).
	Ports []uint16
}

// HTTPSPort is the one target port always allowed.
const HTTPSPort = 443

// AllowedPorts are the target ports p allows (nil: any, with AllowLoopback).
func (p Policy) AllowedPorts() []uint16 {
	if p.AllowLoopback {
		return nil
	}
	return append([]uint16{HTTPSPort}, p.Ports...)
}

func (p Policy) guard() *ssrf.Guardian {
	opts := []ssrf.Option{ssrf.WithAnyPort()}
	if ports := p.AllowedPorts(); ports != nil {
		opts = []ssrf.Option{ssrf.WithPorts(ports...)}
	}
	if p.AllowLoopback {
		opts = append(opts,
			ssrf.WithAllowedV4Prefixes(netip.MustParsePrefix("127.0.0.0/8")),
			ssrf.WithAllowedV6Prefixes(netip.MustParsePrefix("::1/128")))
	}
	return ssrf.New(opts...)
}

// invalidURL is 2010 with details.reason, one of: too_long, malformed, scheme,
// credentials, port, private_target, non_canonical_ip.
func invalidURL(reason, msg string) *apierr.Error {
	return apierr.InvalidWebhookURL.New(msg).WithField("url").With("reason", reason)
}

// CheckURL validates a webhook URL at registration (2010 invalid_webhook_url). It is the
// early, friendly answer; the guarantee is the dial-time check of Client, which looks at
// the address actually dialled, so a name that resolves to a public address now and to a
// private one later (DNS rebinding) is still never connected to. A name that does not
// resolve at registration is accepted: the dial-time check covers it whenever it does.
func (p Policy) CheckURL(ctx context.Context, raw string) error {
	if len(raw) > MaxURLLength {
		return invalidURL("too_long", "the URL is longer than 2,048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return invalidURL("malformed", "the URL is not an absolute http(s) URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowLoopback:
	default:
		return invalidURL("scheme", "the URL must use https")
	}
	if u.User != nil {
		return invalidURL("credentials", "the URL must not carry credentials (user:password@)")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return invalidURL("malformed", "the URL has no host")
	}
	port := HTTPSPort
	if u.Scheme == "http" {
		port = 80
	}
	if ps := u.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return invalidURL("malformed", "the URL's port is invalid")
		}
		port = n
	}
	if allowed := p.AllowedPorts(); allowed != nil && !slices.Contains(allowed, uint16(port)) {
		return invalidURL("port", "the URL's port must be 443 or another HTTPS port this service allows").
			With("allowed_ports", allowed)
	}
	g := p.guard()
	private := func() error {
		return invalidURL("private_target", "the URL must not point at a private, loopback, link-local, multicast or metadata address")
	}
	if strings.Contains(host, "%") { // a zone only means something for link-local targets
		return private()
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if g.SafeAddr(ip) != nil {
			return private()
		}
		return nil
	}
	// Numeric hosts some resolvers read as IPv4 (inet_aton: 2130706433, 0x7f000001,
	// 0177.0.0.1, 127.1): refused whatever they denote, a URL that means an address names
	// it in dotted decimal.
	if ip, ok := legacyIPv4(host); ok {
		if g.SafeAddr(ip) != nil {
			return private()
		}
		return invalidURL("non_canonical_ip", "write an IPv4 address in dotted decimal")
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		if !p.AllowLoopback {
			return private()
		}
		return nil
	}
	var res interface {
		LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	} = net.DefaultResolver
	if p.Resolver != nil {
		res = p.Resolver
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := res.LookupNetIP(lctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if g.SafeAddr(a) != nil {
			return private()
		}
	}
	return nil
}

// legacyIPv4 parses the inet_aton forms of an IPv4 address: one to four parts separated
// by dots, each decimal, octal (leading 0) or hex (0x), the last part filling the
// remaining bytes. ok is false for anything else (a host name).
func legacyIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		if p == "" {
			return netip.Addr{}, false
		}
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*i)
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// Timeout is the spec's bound on one delivery: an answer slower than this is a failure.
const Timeout = 10 * time.Second

// Client returns the HTTP client of deliveries and test calls: every connection is
// checked at dial time against the policy on the IP address actually dialled (after DNS
// resolution, so rebinding cannot sneak a private address in), no proxy from the
// environment is used, redirects are not followed, and a whole exchange is bounded by
// Timeout. maxConnsPerHost bounds connections kept per endpoint (0: 64).
func (p Policy) Client(maxConnsPerHost int) *http.Client {
	if maxConnsPerHost <= 0 {
		maxConnsPerHost = 64
	}
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: p.guard().Safe}
	tr := &http.Transport{
		Proxy:                 nil, // never HTTPS_PROXY: the check must see the real target
		DialContext:           d.DialContext,
		TLSClientConfig:       p.TLS,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: Timeout,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   maxConnsPerHost,
		MaxConnsPerHost:       maxConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   Timeout,
		// Redirects are never followed (a public endpoint redirecting to a private address
		// would otherwise be an open door): the 3xx itself is the answer, a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// IsBlocked reports whether err is a dial refused by the policy.
func IsBlocked(err error) bool {
	return errors.Is(err, ssrf.ErrProhibitedIP) || errors.Is(err, ssrf.ErrProhibitedNetwork) ||
		errors.Is(err, ssrf.ErrProhibitedPort) || errors.Is(err, ssrf.ErrInvalidHostPort)
}
