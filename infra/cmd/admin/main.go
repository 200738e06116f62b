// Command admin is the support and operator tool for the ledger (docs/ledgerstore.md). Every
// command that changes something writes an audit_log row, in the same transaction, naming
// the operator (from the environment: ADMIN_OPERATOR or the OS user, operator.go) and the
// reason (-reason, required).
//
//	admin invariants                                      check the ledger; exit 1 on a violation
//	admin held [-account ID]                              list held deposits
//	admin credit-held -deposit ID [-rate-sun N]           credit a held deposit
//	admin adjust -account ID -amount-sun N -ref REF       adjustment credit (above ADMIN_APPROVAL_ABOVE_SUN: pending)
//	admin approve -ref REF                                approve another operator's pending adjustment
//	admin pending                                         list pending adjustments
//	admin suspend|unsuspend|close -account ID             account status
//	admin rotate-address -account ID                      rotate the deposit address (3018 when too often)
//	admin low-threshold -account ID (-sun N | -default)   the account's balance.low threshold
//	admin market-provider -slug S [-name ...] ...         market board provider metadata (docs/market.md)
//	admin account -account ID                             the account: status, balances, keys (no secrets), addresses, audit
//	admin order -order ID                                 the order: row, fills, signer journal
//	admin revoke-key -key ID                              revoke an API key as support
//	admin replay-webhooks [-account ID] [-event ID] [-dry-run]
//	                                                      queue dead-lettered webhooks again, each at most once
//	admin rotate-master-key [-old-key-file F]             re-encrypt every secret under API_KEY_MASTER_KEY
//	                                                      (old key from F or API_KEY_MASTER_KEY_OLD; never printed)
//
// Configuration comes from the environment like every stage (DATABASE_URL, NETWORK,
// DEPOSIT_HD_KEY, USDT_RATE_SOURCE and USDT_RATE_*, USDT_SPREAD_BPS, DEPOSIT_ROTATION_*; KAFKA_* for
// replay-webhooks; API_KEY_MASTER_KEY for replay-webhooks and rotate-master-key).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"rental/infra/accounts"
	"rental/infra/config"
	"rental/infra/ledgerstore"
	"rental/infra/pg"
	"rental/infra/stages/ledgerstage"
	"rental/schemas/apierr"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "admin:", err)
	}
	os.Exit(code)
}

const usage = `usage: admin <command> [flags]
commands: invariants, held, credit-held, adjust, approve, pending, suspend, unsuspend, close, rotate-address, low-threshold, market-provider,
  account, order, revoke-key, replay-webhooks, rotate-master-key
run "admin <command> -h" for the flags of a command`

// errViolations makes run exit 1 without an extra message.
var errViolations = errors.New("ledger invariants violated")

// run executes one command and returns the exit code: 0 done, 1 refused or failed, 2 usage.
func run(ctx context.Context, args []string, out io.Writer) (int, error) {
	if len(args) == 0 {
		return 2, errors.New(usage)
	}
	cmd, rest := args[0], args[1:]
	if cmd == "market-provider" { // market board metadata (market.go)
		return marketProvider(ctx, rest, out)
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	account := fs.String("account", "", "account id (acc_...)")
	reason := fs.String("reason", "", "why (recorded in the audit row)")
	deposit := fs.String("deposit", "", "deposit id (dep_...)")
	amount := fs.Int64("amount-sun", 0, "amount in SUN")
	ref := fs.String("ref", "", "idempotency reference of the adjustment (a ticket id)")
	rateSun := fs.Int64("rate-sun", 0, "USDT rate in SUN per USDT before the spread (default: the configured rate)")
	sun := fs.Int64("sun", -1, "threshold in SUN")
	def := fs.Bool("default", false, "return to the configured default threshold")
	order := fs.String("order", "", "order id (ord_...)")
	key := fs.String("key", "", "API key id")
	event := fs.String("event", "", "event id (evt_...): replay only this dead letter")
	dryRun := fs.Bool("dry-run", false, "list what would be replayed, change nothing")
	oldKeyFile := fs.String("old-key-file", "", "file holding the old master key in hex (default: API_KEY_MASTER_KEY_OLD)")
	if err := fs.Parse(rest); err != nil {
		return 2, err
	}

	cfg, err := config.Load()
	if err != nil {
		return 1, err
	}
	pool, err := pg.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return 1, err
	}
	defer pool.Close()
	l, err := ledgerstage.Ledger(cfg, pool)
	if err != nil {
		return 1, err
	}
	need := func(names ...string) error {
		for _, n := range names {
			if f := fs.Lookup(n); f == nil || f.Value.String() == "" || f.Value.String() == "0" {
				return fmt.Errorf("%s: -%s is required", cmd, n)
			}
		}
		return nil
	}
	who := func() (string, error) {
		if *reason == "" {
			return "", fmt.Errorf("%s: -reason is required", cmd)
		}
		return operator()
	}

	switch cmd {
	case "invariants":
		v, err := ledgerstore.CheckPool(ctx, pool, ledgerstage.InvariantChecks())
		if err != nil {
			return 1, err
		}
		for _, x := range v {
			fmt.Fprintln(out, x)
		}
		if len(v) > 0 {
			fmt.Fprintf(out, "%d violations\n", len(v))
			return 1, errViolations
		}
		fmt.Fprintln(out, "ledger invariants hold")
		return 0, nil

	case "held":
		hs, err := l.HeldDeposits(ctx, *account)
		if err != nil {
			return 1, err
		}
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "DEPOSIT\tACCOUNT\tASSET\tAMOUNT\tSTATUS\tTX\tSENDER")
		for _, h := range hs {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.ID, h.AccountID, h.Asset, h.Amount, h.Status, h.TxHash, h.Sender)
		}
		return 0, w.Flush()

	case "credit-held":
		if err := need("deposit"); err != nil {
			return 2, err
		}
		a, err := who()
		if err != nil {
			return 2, err
		}
		rate := ledgerstore.Rate{SunPerUSDT: *rateSun, Source: "support"}
		if *rateSun <= 0 {
			src, err := ledgerstage.USDTRate(cfg, nil, nil)
			if err != nil {
				return 1, err
			}
			r, ok, err := src.Rate(ctx)
			if err != nil {
				return 1, err
			}
			if ok {
				rate = ledgerstore.Rate(r)
			}
		}
		credited, err := l.CreditHeld(ctx, *deposit, a, *reason, rate, cfg.Deposit.USDTSpreadBps)
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(out, "credited %s: %d SUN\n", *deposit, credited)
		return 0, nil

	case "adjust":
		if err := need("account", "amount-sun", "ref"); err != nil {
			return 2, err
		}
		a, err := who()
		if err != nil {
			return 2, err
		}
		above, err := approvalAbove()
		if err != nil {
			return 2, err
		}
		if *amount > above {
			pending, err := l.RequestAdjustment(ctx, *account, *amount, *ref, a, *reason)
			if err != nil {
				return 1, err
			}
			if !pending {
				fmt.Fprintf(out, "adjustment %s was already approved and applied; nothing changed\n", *ref)
				return 0, nil
			}
			fmt.Fprintf(out, "adjustment %s of %d SUN to %s is above %d SUN: pending until another operator runs \"admin approve -ref %s\"\n",
				*ref, *amount, *account, above, *ref)
			return 0, nil
		}
		res, err := l.Adjust(ctx, *account, *amount, *ref, a, *reason)
		if err != nil {
			return 1, err
		}
		if !res.Applied {
			fmt.Fprintf(out, "adjustment %s was already applied; nothing changed\n", *ref)
			return 0, nil
		}
		fmt.Fprintf(out, "credited %d SUN to %s; balance %d SUN\n", *amount, *account, res.BalanceSun)
		return 0, nil

	case "approve":
		if err := need("ref"); err != nil {
			return 2, err
		}
		a, err := operator()
		if err != nil {
			return 2, err
		}
		acc, amt, res, err := l.ApproveAdjustment(ctx, *ref, a)
		if err != nil {
			return 1, err
		}
		if !res.Applied {
			fmt.Fprintf(out, "adjustment %s was already approved; nothing changed\n", *ref)
			return 0, nil
		}
		fmt.Fprintf(out, "approved %s: credited %d SUN to %s; balance %d SUN\n", *ref, amt, acc, res.BalanceSun)
		return 0, nil

	case "pending":
		ps, err := l.PendingAdjustments(ctx)
		if err != nil {
			return 1, err
		}
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "REF\tACCOUNT\tAMOUNT_SUN\tREQUESTED_BY\tREQUESTED_AT\tREASON")
		for _, p := range ps {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", p.Ref, p.AccountID, p.AmountSun, p.RequestedBy, p.RequestedAt.Format("2006-01-02T15:04:05Z07:00"), p.Reason)
		}
		return 0, w.Flush()

	case ledgerstore.OpSuspend, ledgerstore.OpUnsuspend, ledgerstore.OpClose:
		if err := need("account"); err != nil {
			return 2, err
		}
		a, err := who()
		if err != nil {
			return 2, err
		}
		to, err := l.SetAccountStatus(ctx, *account, cmd, a, *reason)
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(out, "%s is now %s\n", *account, to)
		return 0, nil

	case "rotate-address":
		if err := need("account"); err != nil {
			return 2, err
		}
		a, err := who()
		if err != nil {
			return 2, err
		}
		store, err := ledgerstage.DepositStore(cfg, pool)
		if err != nil {
			return 1, err
		}
		rot, err := store.Rotate(ctx, *account, a, *reason, ledgerstage.RotationPolicy(cfg))
		if err != nil {
			if e := apierr.As(err); e.Code == apierr.DepositRotationLimited {
				return 1, fmt.Errorf("%s (retry after %d s)", e.Message, e.RetryAfter)
			}
			return 1, err
		}
		if rot.Retired.IsZero() {
			fmt.Fprintf(out, "issued %s (the account had no address)\n", rot.Address)
		} else {
			fmt.Fprintf(out, "new address %s; %s keeps crediting until %s\n", rot.Address, rot.Retired, rot.CreditedUntil.Format("2006-01-02T15:04:05Z"))
		}
		return 0, nil

	case "low-threshold":
		if err := need("account"); err != nil {
			return 2, err
		}
		if (*sun < 0) == !*def {
			return 2, errors.New("low-threshold: give exactly one of -sun N and -default")
		}
		a, err := who()
		if err != nil {
			return 2, err
		}
		var v *int64
		if !*def {
			v = sun
		}
		if err := l.SetLowThreshold(ctx, *account, v, a, *reason); err != nil {
			return 1, err
		}
		fmt.Fprintln(out, "threshold set")
		return 0, nil

	case "account":
		if err := need("account"); err != nil {
			return 2, err
		}
		if err := lookupAccount(ctx, cfg, pool, l, *account, out); err != nil {
			return 1, err
		}
		return 0, nil

	case "order":
		if err := need("order"); err != nil {
			return 2, err
		}
		if err := lookupOrder(ctx, pool, *order, out); err != nil {
			return 1, err
		}
		return 0, nil

	case "revoke-key":
		if err := need("key"); err != nil {
			return 2, err
		}
		a, err := who()
		if err != nil {
			return 2, err
		}
		st, err := accounts.New(pool, accounts.Options{})
		if err != nil {
			return 1, err
		}
		acc, now, err := st.RevokeKeyAsSupport(ctx, *key, a, *reason)
		if err != nil {
			return 1, err
		}
		if !now {
			fmt.Fprintf(out, "%s (account %s) was already revoked; nothing changed\n", *key, acc)
			return 0, nil
		}
		fmt.Fprintf(out, "revoked %s of %s; edge replicas refuse it within KEY_CACHE_TTL (%s)\n", *key, acc, cfg.Auth.KeyCacheTTL)
		return 0, nil

	case "replay-webhooks":
		a := ""
		if !*dryRun {
			if a, err = who(); err != nil {
				return 2, err
			}
		}
		if err := replayWebhooks(ctx, cfg, pool, *account, *event, a, *reason, *dryRun, out); err != nil {
			return 1, err
		}
		return 0, nil

	case "rotate-master-key":
		a, err := who()
		if err != nil {
			return 2, err
		}
		old, err := oldMasterKey(*oldKeyFile)
		if err != nil {
			return 2, err
		}
		if err := rotateMasterKey(ctx, cfg, pool, old, a, *reason, out); err != nil {
			return 1, err
		}
		return 0, nil
	}
	return 2, fmt.Errorf("unknown command %q\n%s", cmd, usage)
}
