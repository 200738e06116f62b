package outbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/outbox"
	"rental/infra/testenv"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/topics"
)

func TestInsertRoutesByEventTypeAndKeysByEntity(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	order := orderEvent(t, "ord_abc", 1)
	balance, err := events.New("balance.low", "acc_9", network.Nile, map[string]any{"balance_sun": 5})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		if err := outbox.Insert(ctx, tx, order); err != nil {
			return err
		}
		return outbox.Insert(ctx, tx, balance)
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT topic, key, value, headers FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		topic, key string
		value      []byte
		headers    map[string]string
	}
	var all []got
	for rows.Next() {
		var g got
		if err := rows.Scan(&g.topic, &g.key, &g.value, &g.headers); err != nil {
			t.Fatal(err)
		}
		all = append(all, g)
	}
	if len(all) != 2 {
		t.Fatalf("%d rows, want 2", len(all))
	}
	if all[0].topic != topics.OrderEvents.Name || all[0].key != "ord_abc" {
		t.Errorf("order event went to %s keyed %s", all[0].topic, all[0].key)
	}
	if all[1].topic != topics.AccountEvents.Name || all[1].key != "acc_9" {
		t.Errorf("balance event went to %s keyed %s", all[1].topic, all[1].key)
	}
	var env map[string]any
	if err := json.Unmarshal(all[0].value, &env); err != nil {
		t.Fatal(err)
	}
	if env["event_id"] != order.EventID || env["event"] != "order.updated" || env["network"] != "mainnet" {
		t.Errorf("stored value is not the envelope: %s", all[0].value)
	}
	if all[0].headers[outbox.HeaderEventID] != order.EventID {
		t.Errorf("headers = %v", all[0].headers)
	}
}

func TestInsertRejectsUnroutableEvents(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	unknown, _ := events.New("mystery.happened", "acc_1", network.Mainnet, map[string]any{})
	keyless, _ := events.New("order.updated", "", network.Mainnet, map[string]any{"state": "x"})
	for _, env := range []events.Envelope{unknown, keyless} {
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error { return outbox.Insert(ctx, tx, env) })
		if err == nil {
			t.Errorf("%s without a route or key was accepted", env.Event)
		}
	}
	if n := unpublished(t, db.Pool); n != 0 {
		t.Fatalf("%d rows written by failed inserts", n)
	}
}

func TestPruneKeepsUnpublishedRows(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for i := range 3 {
			if err := outbox.Insert(ctx, tx, orderEvent(t, "ord_p", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Row 1 published long ago, row 2 just now, row 3 not at all.
	if _, err := db.Pool.Exec(ctx, `
		UPDATE outbox SET published_at = CASE WHEN id = (SELECT min(id) FROM outbox) THEN now() - interval '2 hours' ELSE now() END
		WHERE id < (SELECT max(id) FROM outbox)`); err != nil {
		t.Fatal(err)
	}
	n, err := outbox.Prune(ctx, db.Pool, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var left, pending int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE published_at IS NULL) FROM outbox`).Scan(&left, &pending); err != nil {
		t.Fatal(err)
	}
	if n != 1 || left != 2 || pending != 1 {
		t.Fatalf("pruned %d, left %d rows (%d pending); want 1 pruned, 2 left, 1 pending", n, left, pending)
	}
}
