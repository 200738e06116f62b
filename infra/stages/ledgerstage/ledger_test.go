package ledgerstage

import (
	"context"
	"testing"
	"time"

	"rental/infra/ledgerstore"
	"rental/infra/pricestore"
	"rental/infra/testenv"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

// balance.low prices its reference order (65,000 energy for 1 h) from the operator's price
// model in the current day-part, and falls back to the configured price without a model row.
func TestReferenceOrderPriceFollowsTheModel(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	p := &modelOrderPrice{models: pricestore.New(db.Pool), network: network.Nile, fallback: ledgerstore.FixedOrderPrice(123)}
	if got, _ := p.OrderSun(ctx); got != 123 {
		t.Fatalf("before the model was read: %d, want the fallback 123", got)
	}
	m, err := pricestore.New(db.Pool).Load(ctx, network.Nile)
	if err != nil {
		t.Fatal(err)
	}
	var want int64 = 123
	for _, r := range m.Rows {
		if r.Key() == (pricing.BookKey{Resource: pricing.Energy, Tier: pricing.Tier1h}) {
			pr := r.BasePrice
			if r.FollowsSchedule {
				pr, _ = pricing.ApplyBPS(r.BasePrice, m.DayParts[m.PartAt(time.Now())].FactorBPS)
			}
			want = (int64(pr)*ReferenceOrderEnergy + 99) / 100
		}
	}
	var got int64
	for deadline := time.Now().Add(5 * time.Second); ; {
		got, _ = p.OrderSun(ctx) // the first call started the background read
		if got == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got != want || got <= 0 || want == 123 {
		t.Fatalf("reference order %d SUN, want %d from the model", got, want)
	}
	t.Logf("reference order priced at %d SUN", got)
}
