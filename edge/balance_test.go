package edge

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/ledgerstore"
	"rental/schemas/ledger"
	"rental/schemas/network"
	"rental/schemas/scopes"
)

// ledgerEnv is an edge with the real ledger behind GET /v1/balance and GET /v1/account.
type ledgerEnv struct {
	*authEnv
	l *ledgerstore.Ledger
}

func newLedgerEnv(t *testing.T, extra func(pool *pgxpool.Pool, o *Options)) *ledgerEnv {
	t.Helper()
	base := newAuthEnv(t, authEnvOptions{skipServer: true})
	l, err := ledgerstore.New(base.db.Pool, ledgerstore.Options{Network: network.Nile})
	if err != nil {
		t.Fatal(err)
	}
	le := &ledgerEnv{l: l}
	le.authEnv = newAuthEnv(t, authEnvOptions{shareWith: base, extra: func(o *Options) {
		b, err := NewBalance(l)
		if err != nil {
			t.Fatal(err)
		}
		o.Modules = append(o.Modules, b)
		o.Account.Ledger = LedgerAccounts{Ledger: l}
		if extra != nil {
			extra(base.db.Pool, o)
		}
	}})
	t.Cleanup(func() {
		v, err := ledgerstore.CheckPool(context.Background(), base.db.Pool, ledgerstore.CheckOptions{})
		if err != nil {
			t.Error(err)
		}
		for _, x := range v {
			t.Errorf("invariant broken: %s", x)
		}
	})
	return le
}

func (le *ledgerEnv) inTx(t *testing.T, fn func(pgx.Tx) error) {
	t.Helper()
	if err := pgx.BeginFunc(context.Background(), le.db.Pool, fn); err != nil {
		t.Fatal(err)
	}
}

func TestBalanceShowsCreditsAndHolds(t *testing.T) {
	le := newLedgerEnv(t, nil)
	ctx := context.Background()
	k := le.key(t, scopes.AccountRead)

	r := le.signed(t, k, "GET", "/v1/balance", "")
	if r.status != 200 || r.json["balance_sun"] != 0.0 || r.json["available_sun"] != 0.0 || r.json["as_of"] == nil {
		t.Fatalf("empty balance: HTTP %d %s", r.status, r.body)
	}
	le.inTx(t, func(tx pgx.Tx) error {
		_, err := le.l.Credit(ctx, tx, ledgerstore.Credit{AccountID: le.acct.ID, Kind: ledger.KindAdjustment, Ref: "t1", AmountSun: 50_000_000})
		return err
	})
	le.inTx(t, func(tx pgx.Tx) error { return le.l.PlaceHold(ctx, tx, le.acct.ID, "ord_1", 20_000_000) })
	le.inTx(t, func(tx pgx.Tx) error { return le.l.PlaceHold(ctx, tx, le.acct.ID, "ord_2", 5_000_000) })
	le.inTx(t, func(tx pgx.Tx) error { return le.l.CaptureHold(ctx, tx, "ord_2", 4_000_000) })
	le.inTx(t, func(tx pgx.Tx) error { return le.l.AddOrderTotals(ctx, tx, le.acct.ID, 1, 65_000) })

	r = le.signed(t, k, "GET", "/v1/balance", "")
	if r.status != 200 || r.json["balance_sun"] != 46e6 || r.json["reserved_sun"] != 20e6 || r.json["available_sun"] != 26e6 ||
		r.json["balance_usdt"] != 0.0 || len(r.json) != 5 {
		t.Fatalf("balance: HTTP %d %s", r.status, r.body)
	}
	a := le.signed(t, k, "GET", "/v1/account", "")
	tot, _ := a.json["totals"].(map[string]any)
	if a.status != 200 || a.json["balance_sun"] != 46e6 || a.json["reserved_sun"] != 20e6 || a.json["status"] != "active" ||
		tot["deposited_sun"] != 0.0 || tot["spent_sun"] != 4e6 || tot["orders_created"] != 1.0 || tot["energy_delegated"] != 65e3 {
		t.Fatalf("account: HTTP %d %s", a.status, a.body)
	}
	le.inTx(t, func(tx pgx.Tx) error { return le.l.ReleaseHold(ctx, tx, "ord_1") })

	// A key without account.read is refused with the scope it lacks.
	other := le.key(t, scopes.DepositsRead)
	r = le.signed(t, other, "GET", "/v1/balance", "")
	if e := wantError(t, r, 403, 1005, "insufficient_scope", nil); e["details"].(map[string]any)["required_scope"] != scopes.AccountRead {
		t.Fatalf("%s", r.body)
	}
}
