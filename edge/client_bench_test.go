package edge

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"rental/infra/client"
	"rental/schemas/scopes"
)

// BenchmarkSignedRequestClient is BenchmarkSignedRequest made with the integrators' Go
// client (infra/client: net/http, signing, retry policy, typed decoding) instead of a bare
// signed fasthttp request, on the same kind of edge: the ratio between the two is the
// client's own cost. It also keeps the client exercised on every `make bench`.
func BenchmarkSignedRequestClient(b *testing.B) {
	env, _ := benchEnv(b)
	k := env.key(b, scopes.AccountRead)
	c := client.New(env.ts.url, k.ID, k.Secret)
	ctx := context.Background()
	var seq atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var bal client.Balance
		for pb.Next() {
			// Distinct query per request, as in the reference.
			if err := c.GetJSON(ctx, "/v1/balance?n="+itoa(seq.Add(1)), &bal); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}
