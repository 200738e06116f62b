package quotes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/pg"
	"rental/infra/quotes"
	"rental/infra/testenv"
	"rental/schemas/apierr"
	"rental/schemas/events"
)

func newAccount(t *testing.T, db *testenv.DB, owner string) string {
	t.Helper()
	id := events.NewID("acc")
	if _, err := db.Pool.Exec(context.Background(),
		`INSERT INTO accounts (id, network, owner_address) VALUES ($1, 'nile', $2)`, id, owner); err != nil {
		t.Fatal(err)
	}
	return id
}

func sample(account string, now time.Time) quotes.Quote {
	q := quotes.Quote{
		AccountID: account, Resource: "energy", Amount: 100_000, Tier: "1h",
		Receiver:        "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7",
		PriceSunPerUnit: 61, UnitPriceCenti: 6_005,
		Fills: []quotes.Fill{{PriceCenti: 6_000, Amount: 50_000, Class: "instant"},
			{PriceCenti: 6_010, Amount: 50_000, Class: "market"}},
		EnergyAmountSun: 6_005_000, ActivateAmountSun: 1_100_000, TotalAmountSun: 7_105_000,
	}
	quotes.Stamp(&q, now)
	return q
}

func TestStoreRoundTripAndAccountIsolation(t *testing.T) {
	db := testenv.Postgres(t)
	st := quotes.New(db.Pool)
	ctx := context.Background()
	a := newAccount(t, db, "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7")
	b := newAccount(t, db, "TN3W4H6rK2ce4vX9YnFQHwKENnHjoxb3m9")
	now := time.Date(2025, 3, 1, 12, 0, 0, 123_456_789, time.UTC)
	q := sample(a, now)
	if err := st.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2025, 3, 1, 12, 2, 0, 123_000_000, time.UTC); !q.ExpiresAt.Equal(want) {
		t.Fatalf("expires_at %v, want %v", q.ExpiresAt, want)
	}
	got, err := st.Get(ctx, a, q.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != q.ID || got.Amount != q.Amount || got.Tier != "1h" || got.Receiver != q.Receiver ||
		got.UnitPriceCenti != 6_005 || got.PriceSunPerUnit != 61 || len(got.Fills) != 2 ||
		got.Fills[1] != q.Fills[1] || got.TotalAmountSun != 7_105_000 ||
		!got.CreatedAt.Equal(q.CreatedAt) || !got.ExpiresAt.Equal(q.ExpiresAt) {
		t.Fatalf("read back %+v, stored %+v", got, q)
	}
	if _, err := st.Get(ctx, b, q.ID); !errors.Is(err, quotes.ErrNotFound) {
		t.Fatalf("another account's quote: %v", err)
	}
	if _, err := st.Get(ctx, a, "q_000000000000000000000000"); !errors.Is(err, quotes.ErrNotFound) {
		t.Fatalf("unknown quote: %v", err)
	}
	if _, err := st.Get(ctx, a, "'; DROP TABLE quotes; --"); !errors.Is(err, quotes.ErrNotFound) {
		t.Fatalf("malformed id: %v", err)
	}
}

func TestGetValidExpiryBoundary(t *testing.T) {
	db := testenv.Postgres(t)
	st := quotes.New(db.Pool)
	ctx := context.Background()
	a := newAccount(t, db, "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7")
	now := time.Now()
	q := sample(a, now)
	if err := st.Create(ctx, q); err != nil {
		t.Fatal(err)
	}
	// One millisecond before expires_at the quote is valid; at expires_at it is not.
	if _, err := st.GetValid(ctx, a, q.ID, q.ExpiresAt.Add(-time.Millisecond)); err != nil {
		t.Fatalf("valid quote refused: %v", err)
	}
	_, err := st.GetValid(ctx, a, q.ID, q.ExpiresAt)
	if !errors.Is(err, quotes.ErrExpired) || !errors.Is(err, apierr.QuoteExpired) {
		t.Fatalf("expired quote: %v", err)
	}
	e := apierr.As(err)
	if e.Code.Code != 3005 || e.Details["quote_id"] != q.ID || e.Details["expired_at"] != events.FormatTime(q.ExpiresAt) {
		t.Fatalf("expired error %+v", e)
	}
	if _, err := st.GetValid(ctx, "acc_other", q.ID, now); !errors.Is(err, quotes.ErrNotFound) {
		t.Fatalf("another account: %v", err)
	}
	// A transaction of the caller sees the same.
	err = pg.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := quotes.GetValidTx(ctx, tx, a, q.ID, now)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.PurgeExpired(ctx, q.ExpiresAt.Add(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("purge: %d %v", n, err)
	}
}

func TestCreateRefusesBrokenInvariants(t *testing.T) {
	db := testenv.Postgres(t)
	st := quotes.New(db.Pool)
	ctx := context.Background()
	a := newAccount(t, db, "TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7")
	now := time.Now()
	for name, mut := range map[string]func(*quotes.Quote){
		"total":           func(q *quotes.Quote) { q.TotalAmountSun++ },
		"rounding":        func(q *quotes.Quote) { q.PriceSunPerUnit = 60 },
		"activation tier": func(q *quotes.Quote) { q.Resource = "activation" },
		"no tier":         func(q *quotes.Quote) { q.Tier = "" },
		"amount":          func(q *quotes.Quote) { q.Amount = 0 },
		"id":              func(q *quotes.Quote) { q.ID = "x" },
	} {
		q := sample(a, now)
		mut(&q)
		if err := st.Create(ctx, q); !errors.Is(err, quotes.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM quotes`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows after refused creates: %d %v", n, err)
	}
}
