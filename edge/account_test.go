package edge

import (
	"context"
	"encoding/json"
	"testing"

	"rental/schemas/scopes"
)

type fixedLedger struct{ s LedgerSummary }

func (f fixedLedger) Summary(context.Context, string) (LedgerSummary, error) { return f.s, nil }

type fixedDeposits []DepositAddressRef

func (f fixedDeposits) DepositAddresses(context.Context, string) ([]DepositAddressRef, error) {
	return f, nil
}

func TestGetAccountShape(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{})
	k := env.key(t, scopes.AccountRead)
	r := env.signed(t, k, "GET", "/v1/account", "")
	if r.status != 200 {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	want := `{"id":"` + env.acct.ID + `","brand":"tronrent","network":"nile","label":null,"status":"unfunded",` +
		`"balance_sun":0,"balance_usdt":0,"reserved_sun":0,"deposit_addresses":[],` +
		`"limits":{"max_order_energy":10000000,"max_batch_receivers":100,"orders_per_second":1000},` +
		`"totals":{"deposited_sun":0,"spent_sun":0,"refunded_sun":0,"orders_created":0,"energy_delegated":0},` +
		`"created_at":` + mustJSON(t, r.json["created_at"]) + `}`
	if string(r.body) != want {
		t.Fatalf("body\n%s\nwant\n%s", r.body, want)
	}
}

// The ledger and deposit sources feed the record once they exist.
func TestGetAccountSources(t *testing.T) {
	env := newAuthEnv(t, authEnvOptions{extra: func(o *Options) {
		o.Account.Ledger = fixedLedger{LedgerSummary{BalanceSun: 5_000_000, ReservedSun: 1_000, Totals: AccountTotals{DepositedSun: 5_000_000, OrdersCreated: 2}}}
		const addr = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t" // any valid address: the document checks the format
		o.Account.Deposits = fixedDeposits{{Currency: "TRX", Address: addr}, {Currency: "USDT", Address: addr}}
	}})
	k := env.key(t, scopes.AccountRead)
	r := env.signed(t, k, "GET", "/v1/account", "")
	if r.status != 200 || r.json["balance_sun"] != 5e6 || r.json["reserved_sun"] != 1e3 ||
		len(r.json["deposit_addresses"].([]any)) != 2 || r.json["totals"].(map[string]any)["orders_created"] != 2.0 {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
