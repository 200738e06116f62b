package edge

import (
	"context"
	"sync/atomic"
	"testing"

	"rental/infra/client"
	"rental/schemas/scopes"
)

// BenchmarkSignedRequestClient is BenchmarkSignedRequest made with the integrators' Go
// client (infra/client: net/http keep-alive, signing, retry policy, typed decoding) instead
// of a bare signed fasthttp request, on the same kind of edge and load (steady): the ratio
// between the two is the client's own cost. It also keeps the client exercised on every
// `make bench`.
func BenchmarkSignedRequestClient(b *testing.B) {
	env, _ := benchEnv(b)
	k := env.key(b, scopes.AccountRead)
	c := client.New(env.ts.url, k.ID, k.Secret)
	ctx := context.Background()
	var seq atomic.Int64
	steady(b, func(int) error {
		var bal client.Balance
		// Distinct query per request, as in the reference.
		return c.GetJSON(ctx, "/v1/balance?n="+itoa(seq.Add(1)), &bal)
	})
}
