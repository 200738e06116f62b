package orderstore

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/testenv"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// Order creation answers (and stores for replays) the record Created computes before the
// insert runs, so it must be exactly what a later GET reads back from the row.
func TestCreatedIsTheRowAsReadBack(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	acc := testAccount(t, db.Pool)
	tier, secs := "1h", int64(3600)
	batch, quote, maxPrice := "bat_1", "q_1", int64(9_000_000)
	cases := []NewOrder{
		{ID: NewID(), AccountID: acc, Network: network.Nile, ClientOrderID: "energy", Resource: orders.Energy, Amount: 65_000,
			Tier: &tier, DurationSeconds: &secs, Receiver: "TRecv", Activate: true, UnitPriceCenti: 6_050, EnergyAmountSun: 3_932_500,
			ActivationAmountSun: 1_100_000, BatchID: &batch, QuoteID: &quote, MaxPriceSun: &maxPrice,
			CreatedAt: time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.FixedZone("x", 3600))},
		{ID: NewID(), AccountID: acc, Network: network.Nile, ClientOrderID: "activation", Resource: orders.Activation, Amount: 1,
			Receiver: "TRecv2", UnitPriceCenti: 110_000_000, ActivationAmountSun: 1_100_000, CreatedAt: time.Now()},
	}
	for _, n := range cases {
		var got Row
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			row, admitted, err := InsertLimited(ctx, tx, n, 10)
			if err == nil && !admitted {
				t.Fatal("not admitted under the limit")
			}
			got = row
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		back, err := Get(ctx, db.Pool, acc, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got.Record)
		b, _ := json.Marshal(back.Record)
		if string(a) != string(b) {
			t.Fatalf("%s: created record\n%s\nread back\n%s", n.ClientOrderID, a, b)
		}
		back.NextDueAt = ptrUTC(back.NextDueAt)
		got.NextDueAt = ptrUTC(got.NextDueAt)
		back.CreatedAt, back.UpdatedAt = got.CreatedAt, got.UpdatedAt // compared through JSON above
		if !reflect.DeepEqual(got, back) {
			t.Fatalf("%s: created row\n%+v\nread back\n%+v", n.ClientOrderID, got, back)
		}
	}
	// Over the limit nothing is written.
	n := cases[0]
	n.ID, n.ClientOrderID = NewID(), "third"
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, admitted, err := InsertLimited(ctx, tx, n, 2)
		if err == nil && admitted {
			t.Fatal("admitted a third order in flight with a limit of 2")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Get(ctx, db.Pool, acc, n.ID); err != ErrNotFound {
		t.Fatalf("refused order stored: %v", err)
	}
}

// testAccount stores a nile account and returns its id.
func testAccount(t *testing.T, db DB) string {
	t.Helper()
	acc := events.NewID("acc")
	if _, err := db.Exec(context.Background(), `INSERT INTO accounts (id, network, owner_address) VALUES ($1, 'nile', 'Towner')`, acc); err != nil {
		t.Fatal(err)
	}
	return acc
}

func ptrUTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
