package sweep_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/accounts"
	"rental/infra/deposits"
	"rental/infra/ledgerstore"
	"rental/infra/sweep"
	"rental/infra/testenv"
	"rental/infra/testenv/chainstack"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/events"
	"rental/schemas/network"
)

type simHTTP struct {
	t   *testing.T
	url string
}

func (s simHTTP) post(path string, body, out any) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(s.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		s.t.Fatalf("POST %s: HTTP %d", path, resp.StatusCode)
	}
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
}

func (s simHTTP) account(a tron.Address) tronsim.AccountView {
	s.t.Helper()
	resp, err := http.Get(s.url + "/sim/accounts/" + a.String())
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v tronsim.AccountView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		s.t.Fatal(err)
	}
	return v
}

func (s simHTTP) mine() { s.post("/sim/blocks", map[string]int{"count": 1}, nil) }

// The sweeper moves a deposit address's USDT (with energy lent by the own pool and taken
// back afterwards) and its TRX to the treasury, step by step across runs, through the
// simulator's HTTP API; repeated runs neither sign a second transaction while one is open
// nor sweep again once done.
func TestSweepMovesUSDTWithPoolEnergyThenTRX(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	seed := sha256.Sum256([]byte("sweep test pool"))
	pool := tron.PrivateKeyFromBytes(seed[:])
	treasurySeed := sha256.Sum256([]byte("sweep test treasury"))
	treasury := tron.PrivateKeyFromBytes(treasurySeed[:]).Address()
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile, Genesis: []tronsim.GenesisAccount{
		{Address: pool.Address(), BalanceSun: 1_000_000_000, StakeEnergySun: 1_000_000_000_000}, chainstack.SignerAccount(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	node := simHTTP{t: t, url: srv.URL}

	// An account with a deposit address holding credited TRX and USDT.
	store, _ := accounts.New(db.Pool, accounts.Options{})
	owner, _ := tron.GenerateKey()
	acc, _, err := store.CreateOrGetByOwner(ctx, network.Nile, owner.Address(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := deposits.NewDeriver(deposits.DevSeedHex)
	deps, _ := deposits.NewStore(db.Pool, deposits.Options{Deriver: d, USDTContract: sim.USDTContract().String()})
	addr, err := deps.Current(ctx, acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ TxID string }
	// The treasury is an activated account, as in production.
	node.post("/sim/trx/transfer", map[string]any{"to": treasury.String(), "amount_sun": 1_000_000}, nil)
	node.post("/sim/trx/transfer", map[string]any{"to": addr.String(), "amount_sun": 5_000_000}, &r)
	trxTx := r.TxID
	node.post("/sim/usdt/transfer", map[string]any{"to": addr.String(), "amount": 20_000_000}, &r)
	usdtTx := r.TxID
	node.mine()
	l, _ := ledgerstore.New(db.Pool, ledgerstore.Options{Network: network.Nile})
	credit := func(tx, asset string, amount int64) {
		id := events.NewID("dep")
		err := pgx.BeginFunc(ctx, db.Pool, func(q pgx.Tx) error {
			if _, err := q.Exec(ctx, `INSERT INTO deposits (id, tx_hash, log_index, fact_id, block_num, block_id, block_time, account_id,
				address, sender, asset, amount, status) VALUES ($1, $2, 0, $3, 1, $4, now(), $5, $6, $7, $8, $9, 'pending')`,
				id, tx, "cf_"+tx[:32], tx, acc.ID, addr.String(), sim.FaucetAddress().String(), asset, amount); err != nil {
				return err
			}
			return l.CreditDeposit(ctx, q, ledgerstore.DepositCredit{ID: id, FactID: "cf_" + tx[:32], AccountID: acc.ID,
				TxHash: tx, Sender: sim.FaucetAddress().String(), BlockNum: 1, Asset: asset, Amount: big.NewInt(amount),
				Rate: ledgerstore.Rate{SunPerUSDT: 3_000_000, Source: "fixed_env"}, SpreadBps: 50, Actor: "test"})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	credit(trxTx, "TRX", 5_000_000)
	credit(usdtTx, "USDT", 20_000_000)

	keys, err := sweep.NewKeys(deposits.DevSeedHex)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := keys.Key(0); k.Address() != addr {
		t.Fatalf("derived key of index 0 is %s, the deposit address is %s", k.Address(), addr)
	}
	sw, err := sweep.New(sweep.Options{Pool: db.Pool, Node: tron.NewClient(srv.URL), Keys: keys, Treasury: treasury,
		USDTContract: sim.USDTContract(), EnergyPool: chainstack.GrantSigner(t, sim, tron.NewClient(srv.URL), pool), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	step := func(want map[string]int) sweep.Report {
		t.Helper()
		rep, err := sw.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(rep.Signed) != fmt.Sprint(want) {
			t.Fatalf("run signed %v, want %v (report %+v)", rep.Signed, want, rep)
		}
		return rep
	}
	step(map[string]int{"delegate": 1}) // USDT first; the address has no energy
	if rep := step(map[string]int{}); rep.Rebroadcast != 1 {
		t.Fatalf("an open delegation was not re-broadcast: %+v", rep)
	}
	node.mine()
	step(map[string]int{"usdt": 1})
	node.mine()
	step(map[string]int{"trx": 1, "undelegate": 1})
	node.mine()
	if rep := step(map[string]int{}); rep.Confirmed != 2 {
		t.Fatalf("last run %+v", rep)
	}
	step(map[string]int{})

	tv := node.account(treasury)
	if tv.USDT != 20_000_000 || tv.BalanceSun != 5_500_000 {
		t.Errorf("treasury holds %d USDT units and %d SUN, want 20000000 and 5500000 (1 TRX activation + 4.5 swept)", tv.USDT, tv.BalanceSun)
	}
	if av := node.account(addr); av.USDT != 0 || len(av.DelegationsIn) != 0 {
		t.Errorf("deposit address after the sweep: %+v", av)
	}
	var confirmed int
	_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM sweeps WHERE status = 'confirmed'`).Scan(&confirmed)
	if confirmed != 4 {
		t.Errorf("%d confirmed sweep rows, want 4 (delegate, usdt, undelegate, trx)", confirmed)
	}
	if s, _ := l.Summary(ctx, acc.ID); s.BalanceSun != 5_000_000+20*2_985_000 {
		t.Errorf("a sweep changed the customer's balance: %+v", s)
	}
	if v, err := ledgerstore.CheckPool(ctx, db.Pool, ledgerstore.CheckOptions{}); err != nil || len(v) != 0 {
		t.Errorf("invariants: %v %v", v, err)
	}
}

// A deposit address that only ever received USDT has no account on chain (a TRC-20
// transfer creates none, as on java-tron): the sweeper's pool creates it first, then lends
// it energy, moves the USDT and takes the energy back.
func TestSweepActivatesAUSDTOnlyAddress(t *testing.T) {
	ctx := context.Background()
	db := testenv.Postgres(t)
	seed := sha256.Sum256([]byte("sweep test pool"))
	pool := tron.PrivateKeyFromBytes(seed[:])
	treasurySeed := sha256.Sum256([]byte("sweep test treasury"))
	treasury := tron.PrivateKeyFromBytes(treasurySeed[:]).Address()
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile, Genesis: []tronsim.GenesisAccount{
		{Address: pool.Address(), BalanceSun: 1_000_000_000, StakeEnergySun: 1_000_000_000_000}, chainstack.SignerAccount(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); _ = sim.Close() })
	node := simHTTP{t: t, url: srv.URL}

	store, _ := accounts.New(db.Pool, accounts.Options{})
	owner, _ := tron.GenerateKey()
	acc, _, err := store.CreateOrGetByOwner(ctx, network.Nile, owner.Address(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := deposits.NewDeriver(deposits.DevSeedHex)
	deps, _ := deposits.NewStore(db.Pool, deposits.Options{Deriver: d, USDTContract: sim.USDTContract().String()})
	addr, err := deps.Current(ctx, acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	node.post("/sim/trx/transfer", map[string]any{"to": treasury.String(), "amount_sun": 1_000_000}, nil)
	var r struct{ TxID string }
	node.post("/sim/usdt/transfer", map[string]any{"to": addr.String(), "amount": 7_000_000}, &r)
	node.mine()
	if got, err := tron.NewClient(srv.URL).GetAccount(ctx, addr); err != nil || got.Exists() {
		t.Fatalf("a USDT-only address has an account on chain: %+v %v", got, err)
	}
	l, _ := ledgerstore.New(db.Pool, ledgerstore.Options{Network: network.Nile})
	id := events.NewID("dep")
	err = pgx.BeginFunc(ctx, db.Pool, func(q pgx.Tx) error {
		if _, err := q.Exec(ctx, `INSERT INTO deposits (id, tx_hash, log_index, fact_id, block_num, block_id, block_time, account_id,
			address, sender, asset, amount, status) VALUES ($1, $2, 0, $3, 1, $4, now(), $5, $6, $7, 'USDT', 7000000, 'pending')`,
			id, r.TxID, "cf_"+r.TxID[:32], r.TxID, acc.ID, addr.String(), sim.FaucetAddress().String()); err != nil {
			return err
		}
		return l.CreditDeposit(ctx, q, ledgerstore.DepositCredit{ID: id, FactID: "cf_" + r.TxID[:32], AccountID: acc.ID,
			TxHash: r.TxID, Sender: sim.FaucetAddress().String(), BlockNum: 1, Asset: "USDT", Amount: big.NewInt(7_000_000),
			Rate: ledgerstore.Rate{SunPerUSDT: 3_000_000, Source: "fixed_env"}, SpreadBps: 50, Actor: "test"})
	})
	if err != nil {
		t.Fatal(err)
	}

	keys, _ := sweep.NewKeys(deposits.DevSeedHex)
	sw, err := sweep.New(sweep.Options{Pool: db.Pool, Node: tron.NewClient(srv.URL), Keys: keys, Treasury: treasury,
		USDTContract: sim.USDTContract(), EnergyPool: chainstack.GrantSigner(t, sim, tron.NewClient(srv.URL), pool), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	step := func(want map[string]int) {
		t.Helper()
		rep, err := sw.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(rep.Signed) != fmt.Sprint(want) {
			t.Fatalf("run signed %v, want %v (report %+v)", rep.Signed, want, rep)
		}
	}
	step(map[string]int{"activate": 1})
	node.mine()
	step(map[string]int{"delegate": 1})
	node.mine()
	step(map[string]int{"usdt": 1})
	node.mine()
	step(map[string]int{"undelegate": 1})
	node.mine()
	step(map[string]int{})
	if tv := node.account(treasury); tv.USDT != 7_000_000 {
		t.Errorf("treasury holds %d USDT units, want 7000000", tv.USDT)
	}
	var failed int
	_ = db.Pool.QueryRow(ctx, `SELECT count(*) FROM sweeps WHERE status <> 'confirmed'`).Scan(&failed)
	if failed != 0 {
		t.Errorf("%d sweep rows not confirmed", failed)
	}
}
