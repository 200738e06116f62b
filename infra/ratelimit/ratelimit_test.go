package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"rental/infra/testenv"
	"rental/schemas/apierr"
)

func TestWindowExact(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := New(rdb, prefix)
	ctx := context.Background()
	for i := 1; i <= 30; i++ {
		d, err := l.Window(ctx, "k", 30, time.Second)
		if err != nil || !d.Allowed || d.Remaining != 30-i || d.Limit != 30 {
			t.Fatalf("request %d: %+v %v", i, d, err)
		}
	}
	d, err := l.Window(ctx, "k", 30, time.Second)
	if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > time.Second || Seconds(d.RetryAfter) != 1 {
		t.Fatalf("31st: %+v %v", d, err)
	}
	// Another subject has its own budget.
	if d, _ := l.Window(ctx, "other", 30, time.Second); !d.Allowed {
		t.Fatal("budgets are not separate")
	}
}

// A request made once is charged once: its repeat is refused by the once key and leaves
// the budget as it was; the once key lives for its TTL.
func TestWindowOnce(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := New(rdb, prefix)
	ctx := context.Background()
	once := prefix + "sig:a"
	d, first, err := l.WindowOnce(ctx, "k", 5, time.Second, once, time.Minute)
	if err != nil || !first || !d.Allowed || d.Remaining != 4 {
		t.Fatalf("first use: %+v first=%v %v", d, first, err)
	}
	d, first, err = l.WindowOnce(ctx, "k", 5, time.Second, once, time.Minute)
	if err != nil || first || d.Allowed {
		t.Fatalf("second use: %+v first=%v %v", d, first, err)
	}
	if d, first, _ := l.WindowOnce(ctx, "k", 5, time.Second, prefix+"sig:b", time.Minute); !first || d.Remaining != 3 {
		t.Fatalf("the repeat was charged: %+v", d)
	}
	if ttl := rdb.PTTL(ctx, once).Val(); ttl <= 50*time.Second || ttl > time.Minute {
		t.Fatalf("once key lives %v, want about a minute", ttl)
	}
	if _, _, err := l.WindowOnce(ctx, "k", 5, time.Second, "", time.Minute); err == nil {
		t.Fatal("a missing once key was accepted")
	}
}

func TestQuota(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	l := New(rdb, prefix)
	ctx := context.Background()
	// One hour before the end of a month a year ahead (counters expire on the real clock).
	y := time.Now().UTC().AddDate(1, 0, 0)
	nextMonth := time.Date(y.Year(), y.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	now := nextMonth.Add(-time.Hour)
	q := Quota{Daily: 5, Monthly: 2}
	for i := 0; i < 2; i++ {
		if d, err := l.ChargeQuota(ctx, "acc", q, now); err != nil || !d.Allowed {
			t.Fatalf("%d: %+v %v", i, d, err)
		}
	}
	d, err := l.ChargeQuota(ctx, "acc", q, now)
	if err != nil || d.Allowed || d.Window != "monthly" || !d.ResetsAt.Equal(nextMonth) {
		t.Fatalf("%+v %v", d, err)
	}
	if d, _ := l.ChargeQuota(ctx, "acc", Quota{}, now); !d.Allowed {
		t.Fatal("quota off refused")
	}
}

func TestConcurrency(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	c := NewConcurrency(rdb, ConcurrencyOptions{KeyPrefix: prefix, Max: 2, Lease: 300 * time.Millisecond})
	ctx := context.Background()
	a, err := c.Acquire(ctx, "acc")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(ctx, "acc"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Acquire(ctx, "acc")
	if !errors.Is(err, apierr.ConcurrencyLimited) {
		t.Fatalf("third lease: %v", err)
	}
	if n, _ := c.InFlight(ctx, "acc"); n != 2 {
		t.Fatalf("in flight %d", n)
	}
	if err := c.Release(ctx, "acc", a); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, "acc", a); !errors.Is(err, ErrNoLease) {
		t.Fatalf("double release: %v", err)
	}
	if _, err := c.Acquire(ctx, "acc"); err != nil {
		t.Fatalf("after release: %v", err)
	}
	// Leases of a crashed holder lapse: poll until one is free again.
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, err := c.Acquire(ctx, "acc"); err == nil {
			break
		} else if !errors.Is(err, apierr.ConcurrencyLimited) || time.Now().After(deadline) {
			t.Fatalf("lease never lapsed: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // polling the lease expiry
	}
}
