package deposits

import (
	"context"
	"testing"
	"time"
)

type countingRate struct {
	n    int
	rate int64
}

func (c *countingRate) Rate(context.Context) (Rate, bool, error) {
	c.n++
	return Rate{SunPerUSDT: c.rate, Source: SourceFixedEnv}, c.rate > 0, nil
}

// rate_now is cached 60 s: the source is read again only once the cache is a minute old.
func TestCachedRateKeepsAnswerSixtySeconds(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src := &countingRate{rate: 3_400_000}
	c := &CachedRate{Source: src, Now: func() time.Time { return now }}
	for range 3 {
		if r, ok, err := c.Rate(context.Background()); err != nil || !ok || r.SunPerUSDT != 3_400_000 {
			t.Fatalf("rate %+v %v %v", r, ok, err)
		}
		now = now.Add(20 * time.Second)
	}
	if src.n != 1 {
		t.Fatalf("source read %d times within 60 s", src.n)
	}
	src.rate = 0 // the source lost its rate
	now = now.Add(time.Second)
	if _, ok, _ := c.Rate(context.Background()); ok || src.n != 2 {
		t.Fatalf("after 61 s: ok %v, reads %d", ok, src.n)
	}
	if _, ok, _ := (FixedRate{}).Rate(context.Background()); ok {
		t.Fatal("an unset fixed rate must mean no rate")
	}
}
