package orderstore

import (
	"context"
	"testing"

	"rental/infra/health"
	"rental/infra/testenv"
	"rental/schemas/network"
)

// A pool without a usable signer (migration 00060) makes GET /v1/status's delivery
// degraded until its problem is cleared.
func TestPoolCustodyMakesDeliveryDegraded(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	pool := "TMVQGm1qAQYVdetCeGRRkTWYYrLXuHK2HC"
	stats := DeliveryStats{Pool: db.Pool}
	status := func() health.Status {
		c := health.NewChecker(health.Options{Database: health.NewPostgres(db.Pool), Delivery: stats, Custody: stats})
		return c.Report(ctx).Delivery.Status
	}
	if err := SetPoolCustody(ctx, db.Pool, pool, network.Mainnet, ""); err != nil {
		t.Fatal(err)
	}
	if s := status(); s != health.Operational {
		t.Fatalf("usable pool: %s", s)
	}
	if err := SetPoolCustody(ctx, db.Pool, pool, network.Mainnet, "no active permission allows both"); err != nil {
		t.Fatal(err)
	}
	if p, err := stats.PoolCustodyProblems(ctx); err != nil || p[pool] != "no active permission allows both" {
		t.Fatalf("problems %v %v", p, err)
	}
	if s := status(); s != health.Degraded {
		t.Fatalf("pool without a signer: %s, want degraded", s)
	}
	if err := SetPoolCustody(ctx, db.Pool, pool, network.Mainnet, ""); err != nil {
		t.Fatal(err)
	}
	if s := status(); s != health.Operational {
		t.Fatalf("pool back: %s", s)
	}
}
