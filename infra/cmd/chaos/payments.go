package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"rental/infra/tron"
)

// Payments by transfer in the soak (docs/pricing.md "Pay by transfer"): wallets funded by
// the simulator send TRX to payment_addresses.energy_1h every payEvery, one in four below
// the row's minimum (a refund), each signed once and broadcast until it is in a block or
// expired, through every fault. After the settle, checkPayments requires of every transfer
// the chain holds: a payment row that ended (delivered and settled, refunded, or kept), at
// most one order and one refund for it, and its money accounted for (received = the order's
// spend + kept + refunded). A transfer the chain does not hold must have no order.

const payEvery = 2 * time.Second

type payLoad struct {
	e   *env
	mu  sync.Mutex
	txs map[string]bool // txid -> below the minimum
	wg  sync.WaitGroup
}

// startPayments sends transfers until end; wait for the senders with pl.wg.
func (e *env) startPayments(ctx context.Context, end time.Time) *payLoad {
	pl := &payLoad{e: e, txs: map[string]bool{}}
	pl.wg.Go(func() {
		var pay string
		for i := 0; time.Now().Before(end) && ctx.Err() == nil; i++ {
			time.Sleep(payEvery)
			if pay == "" {
				pay = pl.address(ctx)
				if pay == "" {
					continue
				}
			}
			small := i%4 == 3
			pl.wg.Go(func() { pl.send(ctx, pay, small) })
		}
	})
	return pl
}

// address reads payment_addresses.energy_1h from GET /v1/prices ("" while the stack is down).
func (pl *payLoad) address(ctx context.Context) string {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pl.e.api+"/v1/prices", nil)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var t struct {
		PaymentAddresses map[string]string `json:"payment_addresses"`
	}
	if json.NewDecoder(resp.Body).Decode(&t) != nil {
		return ""
	}
	return t.PaymentAddresses["energy_1h"]
}

// send funds a fresh wallet, signs one transfer and broadcasts it until the node has it.
func (pl *payLoad) send(ctx context.Context, pay string, small bool) {
	to, err := tron.ParseAddress(pay)
	if err != nil {
		return
	}
	k, err := tron.GenerateKey()
	if err != nil {
		return
	}
	if err := pl.e.simCallRetry(ctx, time.Minute, "/sim/trx/transfer", map[string]any{"to": k.Address().String(), "amount_sun": 100_000_000}, nil); err != nil {
		return
	}
	node := tron.NewClient("http://"+pl.e.sim, tron.WithTimeout(5*time.Second))
	amount := int64(5_000_000)
	if small {
		amount = 1_500_000
	}
	var tx *tron.Transaction
	for deadline := time.Now().Add(time.Minute); tx == nil && time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Second) {
		built, err := node.CreateTransaction(ctx, &tron.TransferContract{OwnerAddress: k.Address(), ToAddress: to, Amount: amount})
		if err != nil {
			continue // not funded yet, or the node is down
		}
		if tron.SignTransaction(built, k) == nil {
			tx = built
		}
	}
	if tx == nil {
		return
	}
	pl.mu.Lock()
	pl.txs[tx.TxID] = small
	pl.mu.Unlock()
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Second) {
		if info, err := node.GetTransactionInfoByID(ctx, tx.TxID); err == nil && info.ID != "" {
			return
		}
		_, _ = node.BroadcastTransaction(ctx, tx)
	}
}

// checkPayments checks every transfer sent (columns L lost, D duplicated, C charged twice,
// S stuck).
func (e *env) checkPayments(ctx context.Context, f *findings, pl *payLoad) error {
	pl.wg.Wait()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	ids := make([]string, 0, len(pl.txs))
	for id := range pl.txs {
		ids = append(ids, id)
	}
	// Payments end shortly after their orders: give them a minute past the settle.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		var open int
		if err := e.db.QueryRow(ctx, `SELECT count(*) FROM payments WHERE txid = ANY($1)
			AND (status IN ('seen', 'delivering', 'refunding') OR (status = 'delivered' AND NOT settled))`, ids).Scan(&open); err != nil {
			return err
		}
		if open == 0 {
			break
		}
	}
	node := tron.NewClient("http://"+e.sim, tron.WithTimeout(5*time.Second))
	served, refunded := 0, 0
	for txid, small := range pl.txs {
		info, err := node.GetTransactionInfoByID(ctx, txid)
		if errors.Is(err, tron.ErrNotFound) {
			info, err = &tron.TransactionInfo{}, nil // never in a block (a lost broadcast that expired)
		}
		if err != nil {
			return err
		}
		var orders, refunds int
		if err := e.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM orders WHERE client_order_id = $1),
			(SELECT count(*) FROM ledger_postings WHERE kind = 'payment_refund' AND ref = 'payment_refund:' || $1)`, txid).Scan(&orders, &refunds); err != nil {
			return err
		}
		if orders > 1 {
			f.add("D", "payment %s has %d orders", txid, orders)
		}
		if refunds > 1 || (orders > 0 && refunds > 0 && small) {
			f.add("C", "payment %s refunded %d times (orders %d)", txid, refunds, orders)
		}
		if info.ID == "" {
			if orders > 0 {
				f.add("L", "payment %s is not on chain but has an order", txid)
			}
			continue
		}
		var status string
		var settled bool
		var amount, kept, refund, spent int64
		err = e.db.QueryRow(ctx, `SELECT p.status, p.settled, p.amount_sun, p.kept_sun, p.refund_sun,
			coalesce(o.charged_amount_sun - o.refunded_amount_sun, 0)
			FROM payments p LEFT JOIN orders o ON o.id = p.order_id WHERE p.txid = $1`, txid).Scan(&status, &settled, &amount, &kept, &refund, &spent)
		if err != nil {
			f.add("L", "payment %s is on chain (block %d) but not recorded: %v", txid, info.BlockNumber, err)
			continue
		}
		switch {
		case status == "delivered" && settled, status == "refunded", status == "kept":
			if amount != spent+kept+refund {
				f.add("C", "payment %s (%s): received %d != spent %d + kept %d + refunded %d", txid, status, amount, spent, kept, refund)
			}
			if status == "refunded" {
				refunded++
			} else {
				served++
			}
		default:
			f.add("S", "payment %s still %s (settled %v) after the settle", txid, status, settled)
		}
	}
	e.log.Info("payments by transfer checked", "sent", len(pl.txs), "served", served, "refunded", refunded)
	return nil
}
