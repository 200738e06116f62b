package idempotency

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/testenv"
	"rental/schemas/apierr"
)

func TestDoReplayConflictExpiry(t *testing.T) {
	db := testenv.Postgres(t)
	s := New(db.Pool, Options{Wait: 200 * time.Millisecond})
	ctx := context.Background()
	k := Key{AccountID: "acc_1", Namespace: NamespaceOrder, Key: "client-order-1"}
	runs := 0
	work := func(ctx context.Context, tx pgx.Tx) (Response, error) {
		runs++
		return Response{Status: 201, Body: []byte(`{"id":"ord_1"}`), ObjectID: "ord_1"}, nil
	}
	r, replayed, err := s.Do(ctx, k, Hash([]byte("a")), work)
	if err != nil || replayed || r.Status != 201 {
		t.Fatalf("%+v %v %v", r, replayed, err)
	}
	r, replayed, err = s.Do(ctx, k, Hash([]byte("a")), work)
	if err != nil || !replayed || string(r.Body) != `{"id":"ord_1"}` || runs != 1 {
		t.Fatalf("repeat: %+v %v %v runs=%d", r, replayed, err, runs)
	}
	_, _, err = s.Do(ctx, k, Hash([]byte("b")), work)
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Code != apierr.IdempotencyConflict || ae.Details["original_id"] != "ord_1" {
		t.Fatalf("different body: %v", err)
	}
	// A failed operation leaves no record: the retry runs.
	k2 := Key{AccountID: "acc_1", Namespace: NamespaceOrder, Key: "client-order-2"}
	if _, _, err := s.Do(ctx, k2, Hash([]byte("a")), func(context.Context, pgx.Tx) (Response, error) {
		return Response{}, errors.New("boom")
	}); err == nil {
		t.Fatal("error lost")
	}
	if _, replayed, err := s.Do(ctx, k2, Hash([]byte("a")), work); err != nil || replayed {
		t.Fatalf("retry after failure: %v %v", replayed, err)
	}
	// After the retention the key starts a new operation, even with another body.
	if _, err := db.Pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '25 hours'`); err != nil {
		t.Fatal(err)
	}
	if _, replayed, err := s.Do(ctx, k, Hash([]byte("b")), work); err != nil || replayed {
		t.Fatalf("expired record: %v %v", replayed, err)
	}
	if n, err := s.Prune(ctx); err != nil || n != 1 { // k2's record is the expired one left
		t.Fatalf("prune %d %v", n, err)
	}
}

// While the first transaction holds the key, a duplicate waits Wait and gets 3015.
func TestInProgress(t *testing.T) {
	db := testenv.Postgres(t)
	s := New(db.Pool, Options{Wait: 150 * time.Millisecond})
	ctx := context.Background()
	k := Key{AccountID: "acc_1", Namespace: NamespaceHeader, Key: "key-00000001"}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if c, err := s.ClaimTx(ctx, tx, k, Hash([]byte("x"))); err != nil || !c.Fresh {
		t.Fatalf("%+v %v", c, err)
	}
	start := time.Now()
	_, _, err = s.Do(ctx, k, Hash([]byte("x")), func(context.Context, pgx.Tx) (Response, error) {
		t.Error("duplicate ran")
		return Response{}, nil
	})
	var ae *apierr.Error
	if !errors.As(err, &ae) || ae.Code != apierr.RequestInProgress || ae.RetryAfter != 1 {
		t.Fatalf("got %v", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("answered after %s, before the wait", d)
	}
	if err := s.CompleteTx(ctx, tx, k, Response{Status: 201, Body: []byte(`{}`), ObjectID: "x1"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r, replayed, err := s.Do(ctx, k, Hash([]byte("x")), nil); err != nil || !replayed || r.ObjectID != "x1" {
		t.Fatalf("after commit: %+v %v %v", r, replayed, err)
	}
}

func TestValidKey(t *testing.T) {
	for _, ok := range []string{"abcdefgh", "A-Z_a.z:0-9", string(make128('x'))} {
		if !ValidKey([]byte(ok)) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "short", "has space", "semi;colon", "ünïcode-key", string(make128('x')) + "x"} {
		if ValidKey([]byte(bad)) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func make128(c byte) []byte {
	b := make([]byte, 128)
	for i := range b {
		b[i] = c
	}
	return b
}
