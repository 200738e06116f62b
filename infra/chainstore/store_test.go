package chainstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/schemas/events"
)

func TestTrackNormalisesIDsAndTrackedFindsThem(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := t.Context()
	s := New(db.Pool, outbox.InsertRecord, 10)
	if err := Track(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	// java-tron prints lower-case hex without 0x; callers may hold either form.
	a, b, other := strings.Repeat("ab", 32), strings.Repeat("e2", 32), strings.Repeat("99", 32)
	if err := Track(ctx, db.Pool, "0x"+strings.ToUpper(a), b); err != nil {
		t.Fatal(err)
	}
	if err := Track(ctx, db.Pool, a); err != nil {
		t.Fatalf("tracking an id twice: %v", err)
	}
	got, err := s.Tracked(ctx, []string{a, b, other})
	if err != nil {
		t.Fatal(err)
	}
	if !got[a] || !got[b] || got[other] || len(got) != 2 {
		t.Errorf("tracked = %v, want %s and %s only", got, a, b)
	}
}

func header(n int64) Header {
	return Header{Num: n, ID: blockID(n), ParentID: blockID(n - 1), Time: time.Unix(1_700_000_000+3*n, 0).UTC()}
}

func blockID(n int64) string { return string(rune('a'+n%26)) + "-block" }

func count(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A commit from a cursor that is no longer the stored one writes nothing, and a rewind
// reverts each fact of the orphaned blocks once and bumps the epoch.
func TestAdvanceChecksTheCursorAndRewindRevertsOrphanedFacts(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := t.Context()
	s := New(db.Pool, outbox.InsertRecord, 10)
	start, err := s.Load(ctx, func(context.Context) (Cursor, error) { return Cursor{Num: 9, ID: blockID(9)}, nil })
	if err != nil || start != (Cursor{Num: 9, ID: blockID(9)}) {
		t.Fatalf("load = %+v, %v", start, err)
	}
	fact := events.ChainFact{Kind: events.FactTRXTransfer, TxID: "aa01", BlockNum: 11, BlockID: blockID(11), AmountSun: 5}
	fact.FactID = events.FactID(fact.Kind, fact.TxID, -1, fact.BlockID)
	n, err := s.Advance(ctx, start, []Header{header(10), header(11)}, [][]events.ChainFact{nil, {fact}})
	if err != nil || n != 1 {
		t.Fatalf("advance = %d, %v", n, err)
	}
	if _, err := s.Advance(ctx, start, []Header{header(10)}, [][]events.ChainFact{nil}); !errors.Is(err, ErrCursorMoved) {
		t.Fatalf("advance from a stale cursor: %v, want ErrCursorMoved", err)
	}
	if b, o := count(t, db.Pool, `SELECT count(*) FROM chain_blocks`), count(t, db.Pool, `SELECT count(*) FROM outbox`); b != 2 || o != 1 {
		t.Fatalf("after the refused commit: %d blocks, %d outbox rows; want 2 and 1", b, o)
	}
	oldest, ok, err := s.Oldest(ctx)
	if err != nil || !ok || oldest.Num != 10 || oldest.ParentID != blockID(9) {
		t.Fatalf("oldest = %+v, %v, %v", oldest, ok, err)
	}
	w, err := s.WindowRange(ctx, 10, 11)
	if err != nil || len(w) != 2 || w[0].Num != 11 || w[1].Num != 10 {
		t.Fatalf("window = %+v, %v (want newest first)", w, err)
	}

	at11 := Cursor{Num: 11, ID: blockID(11)}
	reverted, err := s.Rewind(ctx, at11, Cursor{Num: 10, ID: blockID(10)})
	if err != nil || reverted != 1 {
		t.Fatalf("rewind = %d, %v", reverted, err)
	}
	if _, err := s.Rewind(ctx, at11, Cursor{Num: 10, ID: blockID(10)}); !errors.Is(err, ErrCursorMoved) {
		t.Fatalf("second rewind: %v, want ErrCursorMoved", err)
	}
	if o := count(t, db.Pool, `SELECT count(*) FROM outbox`); o != 2 {
		t.Errorf("%d outbox rows, want the fact and one revert", o)
	}
	c, err := s.Load(ctx, nil)
	if err != nil || c != (Cursor{Num: 10, ID: blockID(10), Epoch: 1}) {
		t.Errorf("cursor after the rewind = %+v, %v; want block 10, epoch 1", c, err)
	}
	if b := count(t, db.Pool, `SELECT count(*) FROM chain_blocks`); b != 1 {
		t.Errorf("%d blocks in the window after the rewind, want 1", b)
	}
}

// The first identity checked is stored with the cursor; a node of another chain is then
// refused with an error naming the way out, and the refusal stays recorded as the
// cursor's problem until the follower moves again.
func TestChainIdentityIsStoredThenEnforced(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := t.Context()
	s := New(db.Pool, outbox.InsertRecord, 10)
	start, err := s.Load(ctx, func(context.Context) (Cursor, error) { return Cursor{Num: 9, ID: blockID(9)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	nile := Identity{GenesisID: "0000000000000000aa", Network: "nile"}
	if err := s.CheckIdentity(ctx, nile); err != nil {
		t.Fatalf("first identity: %v", err)
	}
	if err := s.CheckIdentity(ctx, nile); err != nil {
		t.Fatalf("same chain again: %v", err)
	}
	other := Identity{GenesisID: "0000000000000000bb", Network: "nile"}
	err = s.CheckIdentity(ctx, other)
	var ie *IdentityError
	if !errors.As(err, &ie) || ie.Stored != nile || ie.Node != other || !strings.Contains(err.Error(), "make reset") {
		t.Fatalf("another chain: %v", err)
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM chain_cursor WHERE problem LIKE '%another chain%'`); n != 1 {
		t.Fatal("the refusal is not recorded as the cursor's problem")
	}
	if _, err := s.Advance(ctx, start, []Header{header(10)}, [][]events.ChainFact{nil}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM chain_cursor WHERE problem IS NOT NULL`); n != 0 {
		t.Fatal("a cursor move did not clear the problem")
	}
}
