package ledgerstore_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/infra/accounts"
	"rental/infra/ledgerstore"
	"rental/infra/testenv"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/ledger"
	"rental/schemas/network"
)

type env struct {
	db *testenv.DB
	l  *ledgerstore.Ledger
}

func newEnv(t *testing.T, o ledgerstore.Options) *env {
	t.Helper()
	db := testenv.Postgres(t)
	if o.Network == "" {
		o.Network = network.Nile
	}
	l, err := ledgerstore.New(db.Pool, o)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{db: db, l: l}
	t.Cleanup(func() { e.mustHoldInvariants(t) })
	return e
}

func (e *env) mustHoldInvariants(t *testing.T) {
	t.Helper()
	v, err := ledgerstore.CheckPool(context.Background(), e.db.Pool, ledgerstore.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range v {
		t.Errorf("invariant broken: %s", x)
	}
}

func (e *env) account(t *testing.T) string {
	t.Helper()
	store, err := accounts.New(e.db.Pool, accounts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b [20]byte
	_, _ = rand.Read(b[:])
	owner, _ := tron.AddressFromBytes(b[:])
	a, _, err := store.CreateOrGetByOwner(context.Background(), network.Nile, owner, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

func (e *env) tx(t *testing.T, fn func(pgx.Tx) error) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), e.db.Pool, fn)
}

func (e *env) adjust(t *testing.T, acc string, sun int64, ref string) ledgerstore.CreditResult {
	t.Helper()
	var res ledgerstore.CreditResult
	err := e.tx(t, func(tx pgx.Tx) error {
		var err error
		res, err = e.l.Credit(context.Background(), tx, ledgerstore.Credit{AccountID: acc, Kind: ledger.KindAdjustment, Ref: ref, AmountSun: sun, ReferenceID: ref})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (e *env) summary(t *testing.T, acc string) ledgerstore.Summary {
	t.Helper()
	s, err := e.l.Summary(context.Background(), acc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// outboxEvents returns the customer events of acc written to the outbox, oldest first.
func outboxEvents(t *testing.T, pool *pgxpool.Pool, acc string) []events.Envelope {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT value FROM outbox WHERE key = $1 ORDER BY id`, acc)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []events.Envelope
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		var env events.Envelope
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

func TestConcurrentHoldsNeverOverdraw(t *testing.T) {
	e := newEnv(t, ledgerstore.Options{LowThresholdSun: 1})
	acc := e.account(t)
	e.adjust(t, acc, 100_000_000, "seed") // 100 TRX

	const n = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pgx.BeginFunc(context.Background(), e.db.Pool, func(tx pgx.Tx) error {
				return e.l.PlaceHold(context.Background(), tx, acc, fmt.Sprintf("ord_%03d", i), 1_000_000)
			})
			key := "ok"
			if err != nil {
				key = err.Error()
				if ae := apierr.As(err); ae.Code == apierr.BalanceReserved || ae.Code == apierr.InsufficientFunds {
					key = ae.Code.Slug
				}
			}
			mu.Lock()
			codes[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	// 100 TRX cover exactly 100 holds of 1 TRX; the rest find the balance sufficient but
	// reserved: 4002.
	if codes["ok"] != 100 || codes["balance_reserved"] != 100 || len(codes) != 2 {
		t.Fatalf("outcomes %v, want 100 ok and 100 balance_reserved", codes)
	}
	s := e.summary(t, acc)
	if s.AvailableSun != 0 || s.ReservedSun != 100_000_000 || s.BalanceSun != 100_000_000 {
		t.Fatalf("after the race: %+v", s)
	}
	t.Logf("%d concurrent holds in %v (%.0f holds/s)", n, elapsed, n/elapsed.Seconds())
}

func TestHoldLifecycle(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, ledgerstore.Options{LowThresholdSun: 1})
	acc := e.account(t)

	// Nothing deposited: 4001 with details, and the caller's transaction stays usable.
	err := e.tx(t, func(tx pgx.Tx) error {
		err := e.l.PlaceHold(ctx, tx, acc, "ord_a", 5_000_000)
		ae := apierr.As(err)
		if ae.Code != apierr.InsufficientFunds || ae.Details["required_sun"] != int64(5_000_000) || ae.Details["available_sun"] != int64(0) {
			t.Errorf("hold on an empty account: %v %v", err, ae.Details)
		}
		_, err = tx.Exec(ctx, `SELECT 1`)
		return err
	})
	if err != nil {
		t.Fatalf("the caller's transaction was broken by a refused hold: %v", err)
	}

	e.adjust(t, acc, 20_000_000, "seed")
	place := func(ref string, sun int64) error {
		return e.tx(t, func(tx pgx.Tx) error { return e.l.PlaceHold(ctx, tx, acc, ref, sun) })
	}
	if err := place("ord_a", 15_000_000); err != nil {
		t.Fatal(err)
	}
	if err := place("ord_a", 15_000_000); err != nil { // idempotent replay
		t.Fatalf("replayed hold: %v", err)
	}
	if err := place("ord_a", 1); !errors.Is(err, ledgerstore.ErrRefReused) {
		t.Fatalf("hold ref reused for another amount: %v", err)
	}
	if s := e.summary(t, acc); s.ReservedSun != 15_000_000 || s.AvailableSun != 5_000_000 {
		t.Fatalf("after one hold: %+v", s)
	}
	// 10 TRX: balance 20 covers it, but 15 are reserved -> 4002.
	if err := place("ord_b", 10_000_000); apierr.As(err).Code != apierr.BalanceReserved {
		t.Fatalf("want 4002, got %v", err)
	}
	// 30 TRX: the balance itself is short -> 4001.
	if err := place("ord_b", 30_000_000); apierr.As(err).Code != apierr.InsufficientFunds {
		t.Fatalf("want 4001, got %v", err)
	}

	// Capture less than held: the rest is released.
	capture := func(ref string, sun int64) error {
		return e.tx(t, func(tx pgx.Tx) error { return e.l.CaptureHold(ctx, tx, ref, sun) })
	}
	if err := capture("ord_a", 12_000_000); err != nil {
		t.Fatal(err)
	}
	if err := capture("ord_a", 12_000_000); err != nil {
		t.Fatalf("replayed capture: %v", err)
	}
	if err := capture("ord_a", 11_000_000); !errors.Is(err, ledgerstore.ErrHoldClosed) {
		t.Fatalf("capture with another amount: %v", err)
	}
	s := e.summary(t, acc)
	if s.BalanceSun != 8_000_000 || s.ReservedSun != 0 || s.SpentSun != 12_000_000 {
		t.Fatalf("after capture: %+v", s)
	}

	// Release (void) a second hold.
	if err := place("ord_c", 3_000_000); err != nil {
		t.Fatal(err)
	}
	release := func(ref string) error {
		return e.tx(t, func(tx pgx.Tx) error { return e.l.ReleaseHold(ctx, tx, ref) })
	}
	if err := release("ord_c"); err != nil {
		t.Fatal(err)
	}
	if err := release("ord_c"); err != nil {
		t.Fatalf("replayed release: %v", err)
	}
	if err := release("ord_a"); !errors.Is(err, ledgerstore.ErrHoldClosed) {
		t.Fatalf("release of a captured hold: %v", err)
	}
	if err := release("nope"); !errors.Is(err, ledgerstore.ErrHoldNotFound) {
		t.Fatalf("release of an unknown hold: %v", err)
	}
	if s := e.summary(t, acc); s.AvailableSun != 8_000_000 || s.ReservedSun != 0 {
		t.Fatalf("after release: %+v", s)
	}

	// Refund after capture: credited once, one balance.credited with reason refund.
	refund := func() error {
		return e.tx(t, func(tx pgx.Tx) error {
			return e.l.Refund(ctx, tx, acc, "ord_a", 2_000_000, "partial_delivery", "ord_a")
		})
	}
	if err := refund(); err != nil {
		t.Fatal(err)
	}
	if err := refund(); err != nil {
		t.Fatal(err)
	}
	if err := e.tx(t, func(tx pgx.Tx) error { return e.l.AddOrderTotals(ctx, tx, acc, 1, 65_000) }); err != nil {
		t.Fatal(err)
	}
	s = e.summary(t, acc)
	if s.BalanceSun != 10_000_000 || s.RefundedSun != 2_000_000 || s.OrdersCreated != 1 || s.EnergyUsed != 65_000 {
		t.Fatalf("after refund: %+v", s)
	}
	var refunds []events.BalanceCredited
	for _, ev := range outboxEvents(t, e.db.Pool, acc) {
		if ev.Event != events.EventBalanceCredited {
			continue
		}
		var d events.BalanceCredited
		_ = json.Unmarshal(ev.Data, &d)
		if d.Reason == "refund" {
			refunds = append(refunds, d)
		}
	}
	if len(refunds) != 1 {
		t.Fatalf("%d refund events, want 1", len(refunds))
	}
	r := refunds[0]
	if r.AmountSun != 2_000_000 || r.ReferenceID == nil || *r.ReferenceID != "ord_a" || r.TxHash != nil || r.BalanceSun == nil ||
		*r.BalanceSun != 10_000_000 || r.Asset != "TRX" || r.Currency != "TRX" {
		t.Errorf("refund event %+v", r)
	}
}

func TestFirstCreditActivatesAccount(t *testing.T) {
	e := newEnv(t, ledgerstore.Options{})
	acc := e.account(t)
	if res := e.adjust(t, acc, 1_000_000, "a1"); !res.Applied || !res.Activated {
		t.Fatalf("first credit %+v", res)
	}
	if res := e.adjust(t, acc, 1_000_000, "a1"); res.Applied {
		t.Fatal("a replayed credit was applied again")
	}
	if res := e.adjust(t, acc, 1_000_000, "a2"); !res.Applied || res.Activated {
		t.Fatalf("second credit %+v", res)
	}
	var status string
	if err := e.db.Pool.QueryRow(context.Background(), `SELECT status FROM accounts WHERE id = $1`, acc).Scan(&status); err != nil || status != "active" {
		t.Fatalf("status %q %v", status, err)
	}
	if s := e.summary(t, acc); s.BalanceSun != 2_000_000 {
		t.Fatalf("balance %+v", s)
	}
}

func TestBalanceLowOncePerCrossing(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, ledgerstore.Options{LowThresholdSun: 10_000_000, Prices: ledgerstore.FixedOrderPrice(2_000_000)})
	acc := e.account(t)
	e.adjust(t, acc, 15_000_000, "seed")
	hold := func(ref string, sun int64) {
		t.Helper()
		if err := e.tx(t, func(tx pgx.Tx) error { return e.l.PlaceHold(ctx, tx, acc, ref, sun) }); err != nil {
			t.Fatal(err)
		}
	}
	lows := func() []events.BalanceLow {
		var out []events.BalanceLow
		for _, ev := range outboxEvents(t, e.db.Pool, acc) {
			if ev.Event == events.EventBalanceLow {
				var d events.BalanceLow
				_ = json.Unmarshal(ev.Data, &d)
				out = append(out, d)
			}
		}
		return out
	}
	hold("o1", 4_000_000) // available 11: above
	if n := len(lows()); n != 0 {
		t.Fatalf("%d balance.low above the threshold", n)
	}
	hold("o2", 4_000_000) // available 7: crosses
	hold("o3", 1_000_000) // available 6: still below, no second alert
	got := lows()
	if len(got) != 1 || got[0].BalanceSun != 7_000_000 || got[0].ThresholdSun != 10_000_000 || got[0].EstimatedOrdersRemaining != 3 {
		t.Fatalf("balance.low events %+v", got)
	}
	e.adjust(t, acc, 10_000_000, "topup") // available 16: re-armed
	hold("o4", 8_000_000)                 // available 8: crosses again
	if n := len(lows()); n != 2 {
		t.Fatalf("%d balance.low after the second crossing, want 2", n)
	}
	// Per-account threshold.
	th := int64(1_000_000)
	if err := e.l.SetLowThreshold(ctx, acc, &th, "", ""); err != nil {
		t.Fatal(err)
	}
	// Release everything so holds do not outlive the test's invariants check.
	for _, r := range []string{"o1", "o2", "o3", "o4"} {
		if err := e.tx(t, func(tx pgx.Tx) error { return e.l.ReleaseHold(ctx, tx, r) }); err != nil {
			t.Fatal(err)
		}
	}
}

func TestInvariantsDetectTampering(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, ledgerstore.Options{})
	acc := e.account(t)
	e.adjust(t, acc, 5_000_000, "seed")
	if err := e.tx(t, func(tx pgx.Tx) error { return e.l.PlaceHold(ctx, tx, acc, "ord_x", 1_000_000) }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Pool.Exec(ctx, `UPDATE ledger_accounts SET balance_sun = balance_sun + 1, reserved_sun = 0 WHERE account_id = $1`, acc); err != nil {
		t.Fatal(err)
	}
	v, err := ledgerstore.CheckPool(ctx, e.db.Pool, ledgerstore.CheckOptions{Now: time.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, x := range v {
		rules[x.Rule] = true
	}
	for _, want := range []string{"balances", "reserved", "holds"} {
		if !rules[want] {
			t.Errorf("tampering not detected by rule %q: %v", want, v)
		}
	}
	// Repair so the cleanup check passes.
	if _, err := e.db.Pool.Exec(ctx, `UPDATE ledger_accounts SET balance_sun = balance_sun - 1, reserved_sun = 1000000 WHERE account_id = $1`, acc); err != nil {
		t.Fatal(err)
	}
	if err := e.tx(t, func(tx pgx.Tx) error { return e.l.ReleaseHold(ctx, tx, "ord_x") }); err != nil {
		t.Fatal(err)
	}
}

// A capture the account's reservation does not cover is refused and undone: the hold is
// still placed, no posting was written, and the caller's transaction goes on.
func TestCaptureNotCoveredLeavesTheTransactionAsItWas(t *testing.T) {
	e := newEnv(t, ledgerstore.Options{})
	ctx := context.Background()
	acc := e.account(t)
	e.adjust(t, acc, 20_000_000, "seed")
	if err := e.tx(t, func(tx pgx.Tx) error { return e.l.PlaceHold(ctx, tx, acc, "ord_c", 5_000_000) }); err != nil {
		t.Fatal(err)
	}
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the corruption below is never committed
	// A reservation smaller than the hold (what a bug elsewhere would leave).
	if _, err := tx.Exec(ctx, `UPDATE ledger_accounts SET reserved_sun = 0 WHERE account_id = $1`, acc); err != nil {
		t.Fatal(err)
	}
	if err := e.l.CaptureHold(ctx, tx, "ord_c", 5_000_000); err == nil || !strings.Contains(err.Error(), "not covered") {
		t.Fatalf("capture over a missing reservation: %v", err)
	}
	var status string
	var postings int
	if err := tx.QueryRow(ctx, `SELECT status, (SELECT count(*) FROM ledger_postings WHERE ref = 'capture:ord_c')
		FROM ledger_holds WHERE ref = 'ord_c'`).Scan(&status, &postings); err != nil {
		t.Fatalf("the caller's transaction was broken by the refused capture: %v", err)
	}
	if status != "placed" || postings != 0 {
		t.Fatalf("after the refused capture: hold %s, %d postings", status, postings)
	}
	_ = tx.Rollback(ctx)
	// With the reservation intact the same capture goes through, once.
	for range 2 {
		if err := e.tx(t, func(tx pgx.Tx) error { return e.l.CaptureHold(ctx, tx, "ord_c", 5_000_000) }); err != nil {
			t.Fatal(err)
		}
	}
	if s := e.summary(t, acc); s.ReservedSun != 0 || s.BalanceSun != 15_000_000 {
		t.Fatalf("after the capture: %+v", s)
	}
}

// captureGroup runs QueueOrderCaptures for cs in its own transaction, committed only when
// Result accepts the group.
func (e *env) captureGroup(t *testing.T, cs []ledgerstore.OrderCapture) error {
	t.Helper()
	return e.tx(t, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		q, err := e.l.QueueOrderCaptures(b, cs)
		if err != nil {
			return err
		}
		return q.Result(context.Background(), tx, tx.SendBatch(context.Background(), b).Close())
	})
}

// A confirmation group captures its orders' holds as CaptureHold would one by one (the
// whole hold leaves the reservation, the amount leaves the balance as a capture posting,
// the energy counts), and anything but the plain case (a hold captured before, a
// reservation that does not cover the holds) is refused as a whole, changing nothing.
func TestGroupCaptureIsCaptureHoldForManyOrNothing(t *testing.T) {
	e := newEnv(t, ledgerstore.Options{})
	ctx := context.Background()
	a, b := e.account(t), e.account(t)
	e.adjust(t, a, 50_000_000, "seed-a")
	e.adjust(t, b, 50_000_000, "seed-b")
	for _, h := range []struct {
		acc, ref string
		sun      int64
	}{{a, "ord_g1", 5_000_000}, {a, "ord_g2", 7_000_000}, {b, "ord_g3", 4_000_000}, {b, "ord_g4", 3_000_000}} {
		if err := e.tx(t, func(tx pgx.Tx) error { return e.l.PlaceHold(ctx, tx, h.acc, h.ref, h.sun) }); err != nil {
			t.Fatal(err)
		}
	}
	type figures struct{ balance, reserved, spent, energy int64 }
	read := func(acc string) (f figures) {
		t.Helper()
		if err := e.db.Pool.QueryRow(ctx, `SELECT balance_sun, reserved_sun, spent_sun, energy_delegated FROM ledger_accounts
			WHERE account_id = $1`, acc).Scan(&f.balance, &f.reserved, &f.spent, &f.energy); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// ord_g4 was captured one by one before: a group holding it is refused whole.
	if err := e.tx(t, func(tx pgx.Tx) error { return e.l.CaptureHold(ctx, tx, "ord_g4", 3_000_000) }); err != nil {
		t.Fatal(err)
	}
	beforeA, beforeB := read(a), read(b)
	err := e.captureGroup(t, []ledgerstore.OrderCapture{{AccountID: a, Ref: "ord_g1", AmountSun: 5_000_000},
		{AccountID: b, Ref: "ord_g4", AmountSun: 3_000_000}})
	if !errors.Is(err, ledgerstore.ErrGroupCapture) {
		t.Fatalf("group with a hold captured before: %v, want ErrGroupCapture", err)
	}
	if read(a) != beforeA || read(b) != beforeB {
		t.Fatalf("a refused group changed the accounts: %+v %+v, were %+v %+v", read(a), read(b), beforeA, beforeB)
	}
	// A reservation that does not cover the holds (what a bug elsewhere would leave).
	err = e.tx(t, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE ledger_accounts SET reserved_sun = 1 WHERE account_id = $1`, a); err != nil {
			return err
		}
		b := &pgx.Batch{}
		q, err := e.l.QueueOrderCaptures(b, []ledgerstore.OrderCapture{{AccountID: a, Ref: "ord_g1", AmountSun: 5_000_000}})
		if err != nil {
			return err
		}
		return q.Result(ctx, tx, tx.SendBatch(ctx, b).Close())
	})
	if !errors.Is(err, ledgerstore.ErrGroupCapture) {
		t.Fatalf("group over a missing reservation: %v, want ErrGroupCapture", err)
	}
	// The plain case: ord_g2 captured in part (the rest of its hold released).
	if err := e.captureGroup(t, []ledgerstore.OrderCapture{{AccountID: a, Ref: "ord_g1", AmountSun: 5_000_000, Energy: 65_000},
		{AccountID: a, Ref: "ord_g2", AmountSun: 6_000_000, Energy: 130_000},
		{AccountID: b, Ref: "ord_g3", AmountSun: 4_000_000}}); err != nil {
		t.Fatal(err)
	}
	if got, want := read(a), (figures{balance: 39_000_000, reserved: 0, spent: 11_000_000, energy: 195_000}); got != want {
		t.Fatalf("account a after the group: %+v, want %+v", got, want)
	}
	if got, want := read(b), (figures{balance: 43_000_000, reserved: 0, spent: 7_000_000, energy: 0}); got != want {
		t.Fatalf("account b after the group: %+v, want %+v", got, want)
	}
	var postings int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM ledger_postings WHERE kind = 'capture' AND ref LIKE 'capture:ord_g%'`).
		Scan(&postings); err != nil {
		t.Fatal(err)
	}
	if postings != 4 {
		t.Fatalf("%d capture postings, want 4", postings)
	}
	// Once captured, the same group again is not the plain case.
	if err := e.captureGroup(t, []ledgerstore.OrderCapture{{AccountID: b, Ref: "ord_g3", AmountSun: 4_000_000}}); !errors.Is(err, ledgerstore.ErrGroupCapture) {
		t.Fatalf("the group again: %v, want ErrGroupCapture", err)
	}
}
