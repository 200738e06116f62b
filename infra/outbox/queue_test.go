package outbox_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/topics"
)

type record struct {
	topic, key, value string
	headers           map[string]string
}

func readRecords(t *testing.T, ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}) []record {
	t.Helper()
	rows, err := q.Query(ctx, `SELECT topic, key, value, headers FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (record, error) {
		var g record
		var v []byte
		err := r.Scan(&g.topic, &g.key, &v, &g.headers)
		g.value = string(v)
		return g, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A store's batch writes its records in the order given, with the shared headers, in the
// batch's round trip; a record without a key is refused before anything is queued.
func TestQueueRecordsWritesInOrder(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	b := &pgx.Batch{}
	if err := outbox.QueueRecords(b, topics.OrderIntents, []string{"k2", "k1", "k3"}, [][]byte{[]byte("b"), []byte("a"), []byte("c")},
		map[string]string{"kind": "process"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	got := readRecords(t, ctx, db.Pool)
	want := []record{{topics.OrderIntents.Name, "k2", "b", nil}, {topics.OrderIntents.Name, "k1", "a", nil}, {topics.OrderIntents.Name, "k3", "c", nil}}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].topic != want[i].topic || got[i].key != want[i].key || got[i].value != want[i].value || got[i].headers["kind"] != "process" {
			t.Errorf("record %d: %+v, want %+v with kind process", i, got[i], want[i])
		}
	}
	empty := &pgx.Batch{}
	if err := outbox.QueueRecords(empty, topics.OrderIntents, []string{"k", ""}, [][]byte{nil, nil}, nil); err == nil || empty.Len() != 0 {
		t.Fatalf("a record without a key: err %v, %d statements queued", err, empty.Len())
	}
}

// Events queued together are the rows Insert writes one by one (topic by event type, key
// by entity, the envelope as value, event and event id headers), in the order given; an
// event without a topic is refused before anything is queued.
func TestQueueEventsWritesWhatInsertWrites(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	order := orderEvent(t, "ord_q1", 1)
	balance, err := events.New("balance.low", "acc_q", network.Nile, map[string]any{"balance_sun": 5})
	if err != nil {
		t.Fatal(err)
	}
	envs := []events.Envelope{order, balance, orderEvent(t, "ord_q2", 2)}
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for _, env := range envs {
			if err := outbox.Insert(ctx, tx, env); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	one := readRecords(t, ctx, db.Pool)
	if _, err := db.Pool.Exec(ctx, `DELETE FROM outbox`); err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	if err := outbox.QueueEvents(b, envs); err != nil {
		t.Fatal(err)
	}
	if err := db.Pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	many := readRecords(t, ctx, db.Pool)
	if len(one) != 3 || !reflect.DeepEqual(one, many) {
		t.Fatalf("queued together:\n%+v\none by one:\n%+v", many, one)
	}
	bad := &pgx.Batch{}
	unroutable, _ := events.New("no.such", "acc_q", network.Nile, map[string]any{})
	if err := outbox.QueueEvents(bad, []events.Envelope{order, unroutable}); err == nil || bad.Len() != 0 {
		t.Fatalf("an unroutable event: err %v, %d statements queued", err, bad.Len())
	}
}

// RecordPerRow writes one record per row its statement produced, and none when it
// produced none.
func TestRecordPerRowFollowsTheStatementsRows(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	insert, args, err := outbox.RecordPerRow("r", "id", 2, topics.OrderIntents, []byte("v"), map[string]string{"kind": "process"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range [][]string{{"a", "b"}, {}} {
		_, err := db.Pool.Exec(ctx, `WITH r AS (SELECT unnest($1::text[]) AS id), w AS (`+insert+`) SELECT 1`,
			append([]any{ids}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
	}
	got := readRecords(t, ctx, db.Pool)
	if len(got) != 2 || got[0].key != "a" || got[1].key != "b" || got[0].value != "v" || got[1].headers["kind"] != "process" ||
		got[0].topic != topics.OrderIntents.Name {
		t.Fatalf("records %+v, want a and b of %s with value v and kind process", got, topics.OrderIntents.Name)
	}
}
