package webhooks_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rental/infra/webhooks"
	"rental/schemas/webhooksig"
)

// A delivery over HTTPS carries every header of the spec and a signature over the exact
// bytes sent; the answer's first 512 bytes are kept.
func TestSendOverTLSSignedWithEveryHeader(t *testing.T) {
	t.Parallel()
	var got http.Header
	var body []byte
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		body, _ = io.ReadAll(r.Body)
		_, _ = w.Write([]byte(strings.Repeat("y", 600)))
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	p := webhooks.Policy{AllowLoopback: true, TLS: &tls.Config{RootCAs: roots}}
	s := webhooks.Sender{Client: p.Client(0), UserAgent: webhooks.UserAgent("tronrent")}
	msg := webhooks.Message{EventID: "evt_1", EventType: "order.failed", EventVersion: 1,
		Body: []byte(`{"event":"order.failed","event_id":"evt_1","data":{"note":"ünïcode"}}`)}
	sent := s.Send(context.Background(), webhooks.Target{Endpoint: webhooks.Endpoint{URL: srv.URL + "/h"}, Secret: "whsec_x"}, msg, 3)
	if !sent.OK() || sent.Status != 200 || len(sent.Excerpt) != 512 || sent.DeliveryID == "" {
		t.Fatalf("sent %+v", sent)
	}
	want := map[string]string{
		"Content-Type": "application/json; charset=utf-8", "X-Event-Id": "evt_1", "X-Event-Type": "order.failed",
		"X-Event-Version": "1", "X-Delivery-Id": sent.DeliveryID, "X-Delivery-Attempt": "3", "User-Agent": "tronrent-webhook/1",
	}
	for k, v := range want {
		if got.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, got.Get(k), v)
		}
	}
	if string(body) != string(msg.Body) {
		t.Errorf("body changed in transit: %s", body)
	}
	if err := webhooksig.Verify("whsec_x", got.Get("X-API-TIMESTAMP"), body, got.Get("X-API-SIGN"), time.Now()); err != nil {
		t.Errorf("signature: %v", err)
	}
	// The production policy refuses the same loopback HTTPS server at dial time.
	blocked := webhooks.Sender{Client: webhooks.Policy{TLS: p.TLS}.Client(0), UserAgent: "x"}
	if sent := blocked.Send(context.Background(), webhooks.Target{Endpoint: webhooks.Endpoint{URL: srv.URL}, Secret: "s"}, msg, 1); sent.OK() || !webhooks.IsBlocked(sent.Err) {
		t.Errorf("production policy: %+v", sent)
	}
}

// An answer slower than 10 s is a failed delivery.
func TestSendFailsAfterTenSeconds(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(15 * time.Second):
		}
	}))
	defer srv.Close()
	defer close(release)
	s := webhooks.Sender{Client: webhooks.Policy{AllowLoopback: true}.Client(0), UserAgent: "x"}
	start := time.Now()
	sent := s.Send(context.Background(), webhooks.Target{Endpoint: webhooks.Endpoint{URL: srv.URL}, Secret: "s"},
		webhooks.Message{EventID: "evt_1", EventType: "order.failed", EventVersion: 1, Body: []byte("{}")}, 1)
	took := time.Since(start)
	if sent.OK() || sent.Err == nil || sent.Status != 0 {
		t.Errorf("slow receiver: %+v", sent)
	}
	if took < webhooks.Timeout || took > webhooks.Timeout+3*time.Second {
		t.Errorf("gave up after %s, want %s", took, webhooks.Timeout)
	}
}
