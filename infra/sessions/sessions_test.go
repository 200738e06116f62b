package sessions

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/accounts"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/network"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func setup(t *testing.T) (*Store, *clock, string, tron.Address) {
	t.Helper()
	db := testenv.Postgres(t)
	clk := &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	st, err := NewStore(db.Pool, Options{Idle: 30 * time.Minute, Absolute: 2 * time.Hour, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := tron.GenerateKey()
	acc, _ := accounts.New(db.Pool, accounts.Options{})
	a, err := acc.CreateAccount(context.Background(), network.Nile, k.Address(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st, clk, a.ID, k.Address()
}

// The idle deadline slides with use up to the absolute deadline; then the session ends.
func TestSlidingAndAbsoluteLifetime(t *testing.T) {
	st, clk, acct, addr := setup(t)
	ctx := context.Background()
	ss, err := st.Create(ctx, acct, addr, RoleOwner, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if ss.ExpiresAt() != clk.Now().Add(30*time.Minute) {
		t.Fatalf("expires_at %s", ss.ExpiresAt())
	}
	for i := 0; i < 3; i++ { // 3 x 29 min: alive only because each use slides it
		clk.Advance(29 * time.Minute)
		got, err := st.Lookup(ctx, ss.Secret)
		if err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
		if got.ExpiresAt() != clk.Now().Add(30*time.Minute) {
			t.Fatalf("use %d: expires_at %s, want now+30m", i, got.ExpiresAt())
		}
		if got.CSRFToken() != ss.CSRFToken() {
			t.Fatal("csrf token changed")
		}
	}
	clk.Advance(29 * time.Minute) // 116 min after sign-in
	got, err := st.Refresh(ctx, ss.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if got.ExpiresAt() != ss.AbsoluteExpiresAt {
		t.Fatalf("refresh beyond the absolute deadline: %s", got.ExpiresAt())
	}
	clk.Advance(4 * time.Minute)
	if _, err := st.Lookup(ctx, ss.Secret); !errors.Is(err, ErrNoSession) {
		t.Fatalf("after the absolute deadline: %v", err)
	}

	idle, _ := st.Create(ctx, acct, addr, RoleOwner, "192.0.2.1")
	clk.Advance(30 * time.Minute)
	if _, err := st.Lookup(ctx, idle.Secret); !errors.Is(err, ErrNoSession) {
		t.Fatalf("after the idle deadline: %v", err)
	}
}

func TestRevokeAllAndHistory(t *testing.T) {
	st, clk, acct, addr := setup(t)
	ctx := context.Background()
	var live []Session
	for i := range 12 {
		clk.Advance(time.Second)
		ss, err := st.Create(ctx, acct, addr, RoleOwner, fmt.Sprintf("192.0.2.%d", i))
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, ss)
	}
	h, err := st.History(ctx, acct, addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != HistoryLimit || h[0].IP != "192.0.2.11" || h[9].IP != "192.0.2.2" {
		t.Fatalf("history %+v", h)
	}
	var audited int64
	err = st.RevokeAll(ctx, acct, addr, func(_ context.Context, _ pgx.Tx, n int64) error { audited = n; return nil })
	if err != nil || audited != 12 {
		t.Fatalf("revoke all: %d %v", audited, err)
	}
	for _, ss := range live {
		if _, err := st.Lookup(ctx, ss.Secret); !errors.Is(err, ErrNoSession) {
			t.Fatalf("session survived revoke-all: %v", err)
		}
	}
	// A failing audit callback rolls the revocation back.
	ss, _ := st.Create(ctx, acct, addr, RoleOwner, "192.0.2.99")
	boom := errors.New("audit down")
	if err := st.RevokeAll(ctx, acct, addr, func(context.Context, pgx.Tx, int64) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("want the callback's error, got %v", err)
	}
	if _, err := st.Lookup(ctx, ss.Secret); err != nil {
		t.Fatalf("revocation not rolled back: %v", err)
	}
}
