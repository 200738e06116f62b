package edge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"rental/infra/reqsign"
	"rental/schemas/scopes"
)

// BenchmarkSignedRequest measures signed GET requests through the whole edge (per-IP
// budget, signature check with the key cache, replay cache in Redis, scope, per-key
// budget) against a real server on loopback, with parallel clients. The handler is
// trivial so that the figure is the cost of authentication; BenchmarkPublicRequest is
// its reference on the same server.
func BenchmarkSignedRequest(b *testing.B) {
	env, _ := benchEnv(b)
	signedLoad(b, env)
}

// BenchmarkSignedRequestUnderFlood is BenchmarkSignedRequest while other clients send
// signed requests with made-up, well-formed key ids as fast as they can (each id new, so
// each costs a key read and a negative cache entry; the per-IP budget is roomy, as for a
// flood from many addresses): the real key's rate should hold (docs/auth.md "Unknown key
// ids"). Its reference is BenchmarkSignedRequest.
func BenchmarkSignedRequestUnderFlood(b *testing.B) {
	env, _ := benchEnv(b)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	flooder := &fasthttp.HostClient{Addr: env.ts.url[len("http://"):], MaxConns: 8}
	for range 4 {
		go func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			var id [16]byte
			for ctx.Err() == nil {
				_, _ = rand.Read(id[:])
				req.Reset()
				req.SetRequestURI(env.ts.url + "/v1/balance")
				for name, v := range reqsign.Headers("ak_test_"+hex.EncodeToString(id[:]), "sk_test_x", time.Now(), "GET", "/v1/balance", nil) {
					req.Header.Set(name, v)
				}
				_ = flooder.Do(req, resp)
			}
		}()
	}
	signedLoad(b, env)
}

// signedLoad sends signed GETs of one real key with parallel clients and reports req/s.
func signedLoad(b *testing.B, env *authEnv) {
	k := env.key(b, scopes.AccountRead)
	client := &fasthttp.HostClient{Addr: env.ts.url[len("http://"):], MaxConns: 64}
	var seq atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		for pb.Next() {
			// Distinct query per request: identical requests in one millisecond would be
			// refused as replays, correctly.
			target := "/v1/balance?n=" + itoa(seq.Add(1))
			req.Reset()
			req.SetRequestURI(env.ts.url + target)
			for name, v := range reqsign.Headers(k.ID, k.Secret, time.Now(), "GET", target, nil) {
				req.Header.Set(name, v)
			}
			if err := client.Do(req, resp); err != nil {
				b.Fatal(err)
			}
			if resp.StatusCode() != 200 {
				b.Fatalf("HTTP %d %s", resp.StatusCode(), resp.Body())
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkPublicRequest is the reference: a trivial public GET on the same kind of
// server (per-IP budget only).
func BenchmarkPublicRequest(b *testing.B) {
	env, _ := benchEnv(b)
	client := &fasthttp.HostClient{Addr: env.ts.url[len("http://"):], MaxConns: 64}
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI(env.ts.url + "/v1/status")
		for pb.Next() {
			if err := client.Do(req, resp); err != nil {
				b.Fatal(err)
			}
			if resp.StatusCode() != 200 {
				b.Fatalf("HTTP %d %s", resp.StatusCode(), resp.Body())
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

func benchEnv(b *testing.B) (*authEnv, error) {
	ok := func(_ context.Context, rc *fasthttp.RequestCtx) error {
		return WriteJSON(rc, 200, map[string]int{"balance_sun": 0})
	}
	env := newAuthEnv(b, authEnvOptions{
		limits:   RateLimits{Order: 1 << 30, Read: 1 << 30, Management: 1 << 30, IP: roomyLimits.IP},
		handlers: map[string]HandlerFunc{"GET /v1/balance": ok},
	})
	return env, nil
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
