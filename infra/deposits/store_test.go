package deposits

import (
	"context"
	"sync"
	"testing"

	"rental/infra/accounts"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/network"
)

// Concurrent first reads of one account issue exactly one address, the one at the next
// derivation index; another account gets the following index. TRX and USDT rows share it.
func TestCurrentIssuesOnceUnderConcurrency(t *testing.T) {
	db := testenv.Postgres(t)
	ctx := context.Background()
	v := loadVectors(t)
	d, err := NewDeriver(DevSeedHex)
	if err != nil {
		t.Fatal(err)
	}
	st, err := NewStore(db.Pool, Options{Deriver: d, USDTContract: network.Nile.USDTContract()})
	if err != nil {
		t.Fatal(err)
	}
	acc, _ := accounts.New(db.Pool, accounts.Options{})
	mk := func() string {
		k, _ := tron.GenerateKey()
		a, err := acc.CreateAccount(ctx, network.Nile, k.Address(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	first, second := mk(), mk()

	got := make([]tron.Address, 16)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := st.Current(ctx, first)
			if err != nil {
				t.Error(err)
			}
			got[i] = a
		}()
	}
	wg.Wait()
	for _, a := range got {
		if a.String() != v.Vectors[0].Address {
			t.Fatalf("first account got %s, want index 0 = %s", a, v.Vectors[0].Address)
		}
	}
	rows, err := st.List(ctx, second, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Currency != TRX || rows[1].Currency != USDT ||
		rows[0].Address != rows[1].Address || rows[0].Address.String() != v.Vectors[1].Address {
		t.Fatalf("second account rows %+v, want TRX and USDT at index 1 = %s", rows, v.Vectors[1].Address)
	}
	if rows[0].Contract != nil || rows[0].SpreadBps != nil || rows[0].Min != nil || rows[0].Max != nil {
		t.Errorf("TRX row carries USDT-only fields: %+v", rows[0])
	}
	if *rows[1].Contract != network.Nile.USDTContract() || *rows[1].Min != "5" || *rows[1].Max != "2000" ||
		rows[1].ConfirmationsRequired != 19 {
		t.Errorf("USDT row %+v", rows[1])
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM deposit_addresses`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows stored (%v), want 2", n, err)
	}
	only, _ := st.List(ctx, second, USDT)
	if len(only) != 1 || only[0].Currency != USDT {
		t.Errorf("USDT filter: %+v", only)
	}
}
