package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"rental/infra/tron"
	"rental/infra/tronsim"
)

// plantAndCheck (CHAOS_PLANT=1) tests the checker on the finished soak: it plants one defect
// of every kind the soak reports, into the client's answers, the database, the chain and
// the stack's process, runs every check again and fails unless each defect is reported in
// its column. The soak's own result was taken before.
func (e *env) plantAndCheck(ctx context.Context, l *load, receivers []string) error {
	all := l.snapshot()
	var created, expired string
	for _, o := range all {
		if o.outcome == "created" {
			created = o.id
			break
		}
	}
	err := e.db.QueryRow(ctx, `SELECT id FROM orders WHERE status = 'expired' AND charged_amount_sun > 0 ORDER BY id LIMIT 1`).Scan(&expired)
	if err != nil || created == "" {
		return fmt.Errorf("no order to plant defects on (created %q, expired: %v)", created, err)
	}

	// X: the stack dies without the soak killing it.
	e.stack.signal(syscall.SIGKILL, 10*time.Second)
	if err := e.waitRestarted(ctx); err != nil {
		return err
	}
	// L: the client was answered 201 for an order that exists nowhere.
	all = append(all, &order{coid: "chaos-planted-lost", acct: 0, outcome: "created", id: "ord_planted_lost", status: 201})
	// D: the client was refused for a client_order_id that has an order.
	for _, o := range all {
		if o.id == created {
			o.outcome, o.status, o.code = "refused", 409, 3001
		}
	}
	// S: a client that never learnt its outcome.
	all = append(all, &order{coid: "chaos-planted-unknown", acct: 0, calls: 3})
	// C: a second capture of an ended order.
	if _, err := e.db.Exec(ctx, `INSERT INTO ledger_postings (ref, kind, debit, credit, amount_sun, account_id, reference_id)
		SELECT ref || ':planted', kind, debit, credit, amount_sun, account_id, reference_id FROM ledger_postings
		WHERE kind = 'capture' AND reference_id = $1`, expired); err != nil {
		return fmt.Errorf("plant a second capture: %w", err)
	}
	// W: an ended order's record says a price one TRX per unit above what was charged.
	var wrong string
	if err := e.db.QueryRow(ctx, `UPDATE orders SET unit_price_centi = unit_price_centi + 100
		WHERE id = (SELECT id FROM orders WHERE status = 'expired' AND id <> $1 ORDER BY id LIMIT 1) RETURNING id`, expired).Scan(&wrong); err != nil {
		return fmt.Errorf("plant a wrong charge: %w", err)
	}
	// G: energy delegated on chain to a load receiver that no fill accounts for.
	if err := e.plantDelegation(ctx, receivers[0]); err != nil {
		return fmt.Errorf("plant a delegation: %w", err)
	}
	e.log.Info("planted", "lost", "ord_planted_lost", "duplicated", created, "charged_twice", expired, "charged_wrong", wrong,
		"delegated_twice", receivers[0], "stuck", "chaos-planted-unknown", "unexpected_exit", "SIGKILL")

	f, err := e.check(ctx, l, all, receivers)
	if err != nil {
		return err
	}
	var got, missed []string
	for _, c := range columns {
		got = append(got, fmt.Sprintf("%s %d", c.name, f.n[c.key]))
		if f.n[c.key] == 0 {
			missed = append(missed, c.name)
		}
	}
	if len(missed) > 0 {
		return fmt.Errorf("planted defects not reported: %s (reported: %s)", strings.Join(missed, ", "), strings.Join(got, ", "))
	}
	fmt.Fprintf(os.Stderr, "planted: every defect kind reported in its column: %s\n", strings.Join(got, ", "))
	return nil
}

// plantDelegation stakes a fresh account on the simulated chain and delegates 1,000 TRX of
// its energy to receiver, signed by that account's own key, and waits until it is in a
// block past the confirmation depth.
func (e *env) plantDelegation(ctx context.Context, receiver string) error {
	k, err := tron.GenerateKey()
	if err != nil {
		return err
	}
	if err := e.simCallRetry(ctx, 30*time.Second, "/sim/accounts", tronsim.GenesisAccount{Address: k.Address(),
		BalanceSun: 100_000_000, StakeEnergySun: 10_000_000_000}, nil); err != nil {
		return err
	}
	to, err := tron.ParseAddress(receiver)
	if err != nil {
		return err
	}
	node := tron.NewClient("http://" + e.sim)
	tx, err := node.DelegateResource(ctx, &tron.DelegateResourceContract{OwnerAddress: k.Address(), Resource: tron.Energy,
		Balance: 1_000_000_000, ReceiverAddress: to})
	if err != nil {
		return err
	}
	if err := tron.SignTransaction(tx, k); err != nil {
		return err
	}
	if _, err := node.BroadcastTransaction(ctx, tx); err != nil {
		return err
	}
	sleep(ctx, time.Duration(e.st.confirmations+2)*e.st.blockInterval)
	return nil
}
