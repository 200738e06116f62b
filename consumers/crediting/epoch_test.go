package crediting_test

import (
	"context"
	"testing"
	"time"

	"rental/consumers/crediting"
	"rental/infra/accounts"
	"rental/infra/deposits"
	"rental/infra/ledgerstore"
	"rental/infra/testenv"
	"rental/schemas/events"
	"rental/schemas/network"
)

// A transfer whose block a fork takes away and a later fork brings back (A, then B, then A
// again): chainwatch announces each inclusion after a rewind under a new epoch, so the
// deposit is credited whenever its block is on the chain and reversed whenever it is not,
// and ends credited exactly once.
func TestBlockReturningAfterForksIsCreditedAgain(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	d, err := deposits.NewDeriver(deposits.DevSeedHex)
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := d.Address(100000)
	usdt, _ := d.Address(100001)
	sender, _ := d.Address(100002)
	as, err := accounts.New(db.Pool, accounts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := as.CreateAccount(ctx, network.Nile, owner, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := deposits.NewStore(db.Pool, deposits.Options{Deriver: d, USDTContract: usdt.String()})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := ds.Current(ctx, acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledgerstore.New(db.Pool, ledgerstore.Options{Network: network.Nile})
	if err != nil {
		t.Fatal(err)
	}
	c, err := crediting.New(crediting.Options{Pool: db.Pool, Ledger: l, USDTContract: usdt, ConfirmationsRequired: 19, FactDepth: 19})
	if err != nil {
		t.Fatal(err)
	}
	const tx = "aa11"
	fact := func(block string, epoch int64) events.ChainFact {
		return events.ChainFact{Kind: events.FactTRXTransfer, FactID: events.FactIDAt(events.FactTRXTransfer, tx, -1, block, epoch),
			TxID: tx, BlockNum: 100, BlockID: block, BlockTime: events.Time(time.Now()), From: sender.String(), To: addr.String(),
			AmountSun: 5_000_000}
	}
	step := func(name string, f events.ChainFact, want int64) {
		t.Helper()
		if err := c.HandleFact(ctx, f); err != nil {
			t.Fatal(err)
		}
		s, err := l.Summary(ctx, acc.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.BalanceSun != want {
			t.Fatalf("%s: balance %d, want %d", name, s.BalanceSun, want)
		}
	}
	a0 := fact("blockA", 0)
	step("A", a0, 5_000_000)
	step("revert A", events.RevertOf(a0), 0)
	a1 := fact("blockA", 1) // the same block, back after the first rewind
	step("A again", a1, 5_000_000)
	step("revert A again", events.RevertOf(a1), 0)
	b2 := fact("blockB", 2)
	step("B", b2, 5_000_000)
	step("revert B", events.RevertOf(b2), 0)
	step("A once more", fact("blockA", 3), 5_000_000)
	step("a re-read of A once more", fact("blockA", 3), 5_000_000)
	vs, err := ledgerstore.CheckPool(ctx, db.Pool, ledgerstore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("ledger invariant violated: %s", v)
	}
}
