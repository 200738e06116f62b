package webhooks_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"rental/infra/webhooks"
	"rental/schemas/apierr"
)

// fakeResolver answers every name with the addresses in its map (and NXDOMAIN otherwise).
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

var resolver = fakeResolver{
	"hooks.example.com":    {netip.MustParseAddr("93.184.216.34")},
	"internal.example.com": {netip.MustParseAddr("10.1.2.3")},
	"mixed.example.com":    {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("fd00::1")},
	"metadata.example.com": {netip.MustParseAddr("169.254.169.254")},
}

func TestCheckURL(t *testing.T) {
	prod := webhooks.Policy{Resolver: resolver}
	dev := webhooks.Policy{Resolver: resolver, AllowLoopback: true}
	alt := webhooks.Policy{Resolver: resolver, Ports: []uint16{8443}} // WEBHOOK_PORTS=8443
	long := "https://hooks.example.com/" + strings.Repeat("a", 2048)
	cases := []struct {
		url    string
		p      webhooks.Policy
		reason string // "" = accepted
	}{
		{"https://hooks.example.com/rental", prod, ""},
		{"https://hooks.example.com:443/rental?x=1", prod, ""},
		// Only HTTPS ports: 443, and those WEBHOOK_PORTS adds (the review's port scanner).
		{"https://hooks.example.com:8443/rental?x=1", prod, "port"},
		{"https://hooks.example.com:8443/rental?x=1", alt, ""},
		{"https://hooks.example.com:443/rental", alt, ""},
		{"https://93.184.216.34:22/", prod, "port"},
		{"https://93.184.216.34:6379/", alt, "port"},
		{"https://hooks.example.com:80/x", prod, "port"},
		{"https://93.184.216.34/x", prod, ""},
		{"https://unresolvable.example.com/x", prod, ""}, // the dial-time check covers it
		{"http://hooks.example.com/x", prod, "scheme"},
		{"ftp://hooks.example.com/x", prod, "scheme"},
		{"hooks.example.com/x", prod, "malformed"},
		{"https://user:pw@hooks.example.com/x", prod, "credentials"},
		{"https://user@hooks.example.com/x", prod, "credentials"},
		{long, prod, "too_long"},
		{"https://10.0.0.1/x", prod, "private_target"},
		{"https://172.16.5.4/x", prod, "private_target"},
		{"https://192.168.1.1:8443/x", alt, "private_target"},
		{"https://100.64.0.1/x", prod, "private_target"},
		{"https://127.0.0.1/x", prod, "private_target"},
		{"https://0.0.0.0/x", prod, "private_target"},
		{"https://169.254.169.254/latest/meta-data", prod, "private_target"},
		{"https://224.0.0.1/x", prod, "private_target"},
		{"https://[::1]/x", prod, "private_target"},
		{"https://[::ffff:127.0.0.1]/x", prod, "private_target"},
		{"https://[::ffff:7f00:1]/x", prod, "private_target"},
		{"https://[fe80::1%25eth0]/x", prod, "private_target"},
		{"https://[fd00:ec2::254]/x", prod, "private_target"},
		{"https://[ff02::1]/x", prod, "private_target"},
		{"https://2130706433/x", prod, "private_target"},
		{"https://0x7f000001/x", prod, "private_target"},
		{"https://0177.0.0.1/x", prod, "private_target"},
		{"https://127.1/x", prod, "private_target"},
		{"https://0x7f.0.0.1/x", prod, "private_target"},
		{"https://1572395042/x", prod, "non_canonical_ip"}, // 93.184.216.34 in decimal
		{"https://localhost/x", prod, "private_target"},
		{"https://api.localhost/x", prod, "private_target"},
		{"https://internal.example.com/x", prod, "private_target"},
		{"https://mixed.example.com/x", prod, "private_target"},
		{"https://metadata.example.com/x", prod, "private_target"},
		// The dev setting admits loopback and plain http, nothing else private.
		{"http://127.0.0.1:8080/x", dev, ""},
		{"https://[::1]:8443/x", dev, ""},
		{"http://localhost:9000/x", dev, ""},
		{"http://10.0.0.1/x", dev, "private_target"},
		{"http://169.254.169.254/x", dev, "private_target"},
		{"http://[::ffff:127.0.0.1]/x", dev, "private_target"},
	}
	for _, c := range cases {
		err := c.p.CheckURL(context.Background(), c.url)
		if c.reason == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.url, err)
			}
			continue
		}
		e := apierr.As(err)
		if err == nil || e.Code != apierr.InvalidWebhookURL || e.Details["reason"] != c.reason || e.Field != "url" {
			t.Errorf("%.60s: got %v (%v), want 2010 reason %s", c.url, err, e.Details, c.reason)
		}
	}
}

// listener counts the connections it accepts.
type listener struct {
	ln       net.Listener
	accepted atomic.Int64
}

func listen(t *testing.T, network, addr string) *listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return l
}

func (l *listener) port() string {
	_, p, _ := net.SplitHostPort(l.ln.Addr().String())
	return p
}

// The dial-time check refuses private targets however they are written and whatever a
// name resolves to at the moment of the dial, and never opens a connection to them.
func TestClientRefusesPrivateTargetsAtDialTime(t *testing.T) {
	l4 := listen(t, "tcp4", "127.0.0.1:0")
	client := webhooks.Policy{}.Client(0)
	urls := []string{
		"https://127.0.0.1:" + l4.port() + "/",
		"http://127.0.0.1:" + l4.port() + "/",
		"https://localhost:" + l4.port() + "/", // a name resolving to loopback: rebinding-safe
		"https://[::ffff:127.0.0.1]:" + l4.port() + "/",
		// Numeric forms (2130706433, 0x7f000001, 0177.0.0.1) are refused at registration
		// (TestCheckURL); Go's resolver would only send them to DNS, which tests do not use.
		"http://169.254.169.254/latest/meta-data/",
		"http://10.255.255.1/",
	}
	var l6 *listener
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		l6 = listen(t, "tcp6", "[::1]:0")
		urls = append(urls, "https://[::1]:"+l6.port()+"/")
	}
	for _, u := range urls {
		resp, err := client.Post(u, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: connected (HTTP %d)", u, resp.StatusCode)
			continue
		}
		if !webhooks.IsBlocked(err) {
			t.Errorf("%s: failed for another reason than the policy: %v", u, err)
		}
	}
	if n := l4.accepted.Load(); n != 0 {
		t.Errorf("the IPv4 loopback listener accepted %d connections", n)
	}
	if l6 != nil && l6.accepted.Load() != 0 {
		t.Errorf("the IPv6 loopback listener accepted %d connections", l6.accepted.Load())
	}
}

// The dial-time check also refuses ports other than 443 and those configured, whatever was
// registered before the rule: the test call cannot read another service's banner.
func TestClientRefusesOtherPortsAtDialTime(t *testing.T) {
	for _, u := range []string{"https://93.184.216.34:22/", "http://93.184.216.34:25/", "https://93.184.216.34:8443/"} {
		resp, err := webhooks.Policy{}.Client(0).Post(u, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("%s: connected", u)
		}
		if !webhooks.IsBlocked(err) {
			t.Errorf("%s: failed for another reason than the policy: %v", u, err)
		}
	}
}

// A redirect is the answer, never followed: its target gets no connection even when the
// policy would allow it.
func TestClientDoesNotFollowRedirects(t *testing.T) {
	target := listen(t, "tcp4", "127.0.0.1:0")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1:"+target.port()+"/internal", http.StatusFound)
	})}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	s := webhooks.Sender{Client: webhooks.Policy{AllowLoopback: true}.Client(0), UserAgent: "t-webhook/1"}
	sent := s.Send(context.Background(), webhooks.Target{Endpoint: webhooks.Endpoint{URL: "http://" + ln.Addr().String() + "/hook"}, Secret: "s"},
		webhooks.Message{EventID: "evt_1", EventType: "order.confirmed", EventVersion: 1, Body: []byte("{}")}, 1)
	if sent.OK() || sent.Status != http.StatusFound {
		t.Errorf("redirect answer: OK=%v status %d err %v", sent.OK(), sent.Status, sent.Err)
	}
	if n := target.accepted.Load(); n != 0 {
		t.Errorf("the redirect target got %d connections", n)
	}
}
