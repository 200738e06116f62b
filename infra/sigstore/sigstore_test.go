package sigstore

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"rental/infra/testenv"
)

func TestRecordOnceAndGroupRecords(t *testing.T) {
	db := testenv.Postgres(t)
	s := New(db.Pool, 0)
	ctx := context.Background()
	a := Sig{KeyID: "rk_a", Sum: []byte("0123456789abcdef0123456789abcdef")}
	b := Sig{KeyID: "rk_b", Sum: []byte("0123456789abcdef0123456789abcdef")}

	if err := s.Record(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, a); !errors.Is(err, ErrUsed) {
		t.Fatalf("second use: %v, want ErrUsed", err)
	}
	// The same HMAC under another key is another signature.
	batch := &pgx.Batch{}
	ex := s.QueueExisting(batch, []Sig{a, b})
	if err := db.Pool.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatal(err)
	}
	if !ex.Has(a) || ex.Has(b) {
		t.Fatalf("existing: a %v b %v", ex.Has(a), ex.Has(b))
	}
	batch = &pgx.Batch{}
	s.QueueInsertMany(batch, []Sig{b})
	q := s.QueueRecord(batch, Sig{KeyID: "rk_c", Sum: []byte("x")})
	if err := db.Pool.SendBatch(ctx, batch).Close(); err != nil || q.Err() != nil {
		t.Fatalf("group insert: %v %v", err, q.Err())
	}
	batch = &pgx.Batch{}
	s.QueueInsertMany(batch, []Sig{b})
	if err := db.Pool.SendBatch(ctx, batch).Close(); !errors.Is(err, ErrUsed) {
		t.Fatalf("group insert of a used signature: %v, want ErrUsed", err)
	}

	// An expired record no longer refuses (its timestamp cannot pass the skew check).
	if _, err := db.Pool.Exec(ctx, `UPDATE used_signatures SET expires_at = now() - interval '1 second' WHERE key_id = 'rk_a'`); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, a); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}
