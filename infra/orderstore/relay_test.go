package orderstore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/testenv"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// A relayed order's record (with its transaction, waiting) is what the row reads back as,
// and one transaction is relayed by one order: another account's order for the same txid
// fails as IsRelayTaken and writes nothing.
func TestRelayedOrderReadsBackAndItsTransactionIsRelayedOnce(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	tier, secs := "5m", int64(300)
	txid := strings.Repeat("ab", 32)
	newOrder := func(acc string) NewOrder {
		return NewOrder{ID: NewID(), AccountID: acc, Network: network.Mainnet, ClientOrderID: txid, Resource: orders.Energy,
			Amount: 70_714, Tier: &tier, DurationSeconds: &secs, Receiver: "TOwner", UnitPriceCenti: 6_600, EnergyAmountSun: 4_667_124,
			CreatedAt: time.Now(), Relay: &NewRelay{TxID: txid, Owner: "TOwner", Signed: json.RawMessage(`{"txID":"` + txid + `"}`),
				Expiration: time.Now().Add(time.Minute), EnergyRequired: 64_285}}
	}
	insert := func(n NewOrder) (Row, error) {
		var row Row
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			var err error
			row, _, err = InsertLimited(ctx, tx, n, 10)
			return err
		})
		return row, err
	}
	acc := testAccount(t, db.Pool)
	n := newOrder(acc)
	got, err := insert(n)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Get(ctx, db.Pool, acc, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got.Record)
	b, _ := json.Marshal(back.Record)
	if string(a) != string(b) || back.Transaction == nil || back.Transaction.Status != orders.TxWaiting || back.Transaction.TxID != txid {
		t.Fatalf("created\n%s\nread back\n%s", a, b)
	}
	if owner, id, found, err := RelayOf(ctx, db.Pool, txid); err != nil || !found || owner != acc || id != n.ID {
		t.Fatalf("RelayOf: %s %s %v %v", owner, id, found, err)
	}
	ps, err := PendingRelays(ctx, db.Pool, 10)
	if err != nil || len(ps) != 1 || ps[0].OrderID != n.ID || ps[0].EnergyRequired != 64_285 || ps[0].State.Status != orders.TxWaiting {
		t.Fatalf("pending %+v %v", ps, err)
	}

	other := events.NewID("acc")
	if _, err := db.Pool.Exec(ctx, `INSERT INTO accounts (id, network, owner_address) VALUES ($1, 'nile', 'Tother')`, other); err != nil {
		t.Fatal(err)
	}
	n2 := newOrder(other)
	if _, err := insert(n2); !IsRelayTaken(err) {
		t.Fatalf("a second order relaying the transaction: %v, want IsRelayTaken", err)
	}
	if _, err := Get(ctx, db.Pool, other, n2.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused order was written: %v", err)
	}
}
