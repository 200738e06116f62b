package tronsim

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"rental/infra/tron"
	"rental/schemas/network"
)

// A wallet adds a memo the way TronWeb's transactionBuilder.addUpdateData does: it builds
// the transfer with /wallet/createtransaction, writes raw_data.data, asks
// /wallet/getsignweight for the re-id'd transaction, signs and broadcasts it. The memo is
// kept in the block and charged as bandwidth (its bytes are part of the transaction's
// size, BandwidthProcessor), and getsignweight reports the owner's permission weight.
func TestMemoThroughGetSignWeight(t *testing.T) {
	h := newHarness(t, Options{Network: network.Nile})
	w, to := newKey(t), newKey(t)
	h.seed(GenesisAccount{Address: w.Address(), BalanceSun: 100 * tron.SunPerTRX})
	h.seed(GenesisAccount{Address: to.Address(), BalanceSun: tron.SunPerTRX})
	send := func(memo string) (string, *tron.Transaction) {
		var built map[string]any
		h.wallet("/wallet/createtransaction", map[string]any{"owner_address": w.Address().String(), "to_address": to.Address().String(),
			"amount": 1_000_000, "visible": true}, &built)
		if memo != "" {
			built["raw_data"].(map[string]any)["data"] = hex.EncodeToString([]byte(memo))
		}
		var sw struct {
			Result struct {
				Code string `json:"code"`
			} `json:"result"`
			Permission struct {
				Threshold int64 `json:"threshold"`
			} `json:"permission"`
			Transaction struct {
				TxID        string           `json:"txid"`
				Transaction tron.Transaction `json:"transaction"`
			} `json:"transaction"`
		}
		h.wallet("/wallet/getsignweight", built, &sw)
		tx := sw.Transaction.Transaction
		if sw.Result.Code != "NOT_ENOUGH_PERMISSION" || sw.Permission.Threshold != 1 || sw.Transaction.TxID != tx.TxID {
			t.Fatalf("getsignweight of an unsigned transfer: %+v", sw)
		}
		if memo != "" && tx.TxID == built["txID"] {
			t.Fatal("the memo did not change the transaction id")
		}
		if err := tron.SignTransaction(&tx, w); err != nil {
			t.Fatal(err)
		}
		h.wallet("/wallet/getsignweight", &tx, &sw)
		if sw.Result.Code != "ENOUGH_PERMISSION" {
			t.Fatalf("signed: %+v", sw.Result)
		}
		if r := h.broadcast(&tx); !r.Result {
			t.Fatalf("broadcast: %+v", r)
		}
		return tx.TxID, &tx
	}
	memo := strings.Repeat("m", 120)
	plainID, _ := send("")
	memoID, _ := send(memo)
	h.mine(1)
	var got tron.Transaction
	h.wallet("/wallet/gettransactionbyid", tron.ValueRequest{Value: memoID}, &got)
	raw, err := tron.ParseRawDataJSON(got.RawData)
	if err != nil || string(raw.Data) != memo {
		t.Fatalf("memo in the block: %q %v", raw.Data, err)
	}
	// The memo's bytes, its field tag and its length (raw_data.data, field 10) are charged.
	// The second transfer outruns the free allowance and burns TransactionFee (1000 SUN)
	// per byte instead.
	size := func(txid string) int64 { r := h.info(txid).Receipt; return r.NetUsage + r.NetFee/1000 }
	plain, withMemo := size(plainID), size(memoID)
	if withMemo-plain != int64(len(memo)+2) {
		t.Fatalf("bandwidth %d with a %d-byte memo, %d without", withMemo, len(memo), plain)
	}
	// An owner without an account: PERMISSION_ERROR, as java-tron's PermissionException.
	var ghost map[string]any
	k := newKey(t)
	b, _ := json.Marshal(map[string]any{"raw_data": map[string]any{"contract": []any{map[string]any{"type": "TransferContract",
		"parameter": map[string]any{"type_url": "type.googleapis.com/protocol.TransferContract",
			"value": map[string]any{"owner_address": hexAddr(k.Address()), "to_address": hexAddr(to.Address()), "amount": 1}}}},
		"ref_block_bytes": "0000", "ref_block_hash": "0000000000000000", "expiration": 1, "timestamp": 1}})
	h.wallet("/wallet/getsignweight", json.RawMessage(b), &ghost)
	if res, _ := ghost["result"].(map[string]any); res["code"] != "PERMISSION_ERROR" || res["message"] != "Account does not exist!" {
		t.Fatalf("no account: %v", ghost)
	}
}

func hexAddr(a tron.Address) string { return hex.EncodeToString(a[:]) }
