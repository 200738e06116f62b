package edge

import (
	"context"
	"strings"
	"testing"

	"rental/infra/client"
	"rental/infra/paystore"
	"rental/infra/testenv"
	"rental/schemas/network"
)

// GET /v1/payments/{txid}: public, the transfer as stored; 404 3022 for an unknown id and
// 400 2001 for something that is no transaction id.
func TestPaymentLookUp(t *testing.T) {
	db := testenv.Postgres(t)
	store := paystore.New(db.Pool, network.Nile)
	m, err := NewPayments(store)
	if err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, withOptions(func(o *Options) { o.Modules = append(o.Modules, m) }))
	txid := strings.Repeat("ab", 32)
	if _, err := db.Pool.Exec(context.Background(), `INSERT INTO payments (txid, network, address, row_key, sender, receiver, memo,
		amount_sun, block_num, block_id, block_time, tx_expires, status, refund_sun, reason, refund_txid)
		VALUES ($1, 'nile', 'TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf', 'energy_1h', 'TWsm8HtU2A5eEzoT8ev8yaoFjHsXLLrckb', 'TWsm8HtU2A5eEzoT8ev8yaoFjHsXLLrckb', NULL, 500000, 7, 'b7', '2026-11-28T10:00:00Z',
		'2026-11-28T10:01:00Z', 'refunding', 500000, 'below_minimum', $2)`, txid, strings.Repeat("cd", 32)); err != nil {
		t.Fatal(err)
	}
	r := ts.do(t, "GET", "/v1/payments/"+strings.ToUpper(txid), "", "")
	if r.status != 200 || r.json["status"] != "refunded" || r.json["refund_sun"] != float64(500_000) || r.json["reason"] != "below_minimum" ||
		r.json["row"] != "energy_1h" || r.json["block_time"] != "2026-11-28T10:00:00.000Z" || r.json["order_id"] != nil {
		t.Fatalf("HTTP %d %s", r.status, r.body)
	}
	// The Go client without a key reads the same.
	got, err := client.New(ts.url, "", "").Payment(context.Background(), txid)
	if err != nil || got.Status != "refunded" || got.RefundTxID == nil || *got.RefundTxID != strings.Repeat("cd", 32) || got.DelegateHashes == nil {
		t.Fatalf("client: %+v %v", got, err)
	}
	wantError(t, ts.do(t, "GET", "/v1/payments/"+strings.Repeat("00", 32), "", ""), 404, 3022, "object_not_found", "txid")
	wantError(t, ts.do(t, "GET", "/v1/payments/not-a-txid", "", ""), 400, 2001, "validation_failed", "txid")
}
