package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"testing"
	"time"

	"rental/infra/client"
	"rental/infra/tron"
	"rental/schemas/apierr"
)

// relayTransfer has a fresh wallet holding USDT and 1 TRX, without energy, sign a USDT
// transfer and hands it to POST /v1/transactions with the caller's key (orders.write);
// it returns the order relaying it.
func (c *caller) relayTransfer(t *testing.T) string {
	t.Helper()
	wallet, _ := tron.GenerateKey()
	to, _ := tron.GenerateKey()
	for _, a := range []map[string]any{
		{"address": wallet.Address().String(), "balance_sun": tron.SunPerTRX, "usdt": 50_000_000},
		{"address": to.Address().String(), "balance_sun": tron.SunPerTRX, "usdt": 1},
	} {
		c.want(c.sim("POST", "/sim/accounts", a), 200, "seed account")
	}
	var info struct {
		USDT string `json:"usdt_contract"`
	}
	c.want(c.sim("GET", "/sim/info", nil), 200, "GET /sim/info").decode(t, &info)
	usdt, err := tron.ParseAddress(info.USDT)
	if err != nil {
		t.Fatal(err)
	}
	data, err := tron.TRC20TransferData(to.Address(), big.NewInt(1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	node := tron.NewClient("http://"+c.s.sim, tron.WithTimeout(5*time.Second))
	tx, err := node.TriggerSmartContract(ctx, &tron.TriggerSmartContract{OwnerAddress: wallet.Address(), ContractAddress: usdt, Data: data}, 50*tron.SunPerTRX)
	if err != nil {
		t.Fatal(err)
	}
	// Signed by another key: 400 2062 over HTTP, nothing stored.
	forged := *tx
	other, _ := tron.GenerateKey()
	raw, _ := hex.DecodeString(tx.RawDataHex)
	h := sha256.Sum256(raw)
	sig, _ := other.SignHash(h[:])
	forged.Signature = []string{hex.EncodeToString(sig)}
	fb, _ := json.Marshal(&forged)
	if _, err := c.key.RelayTransaction(ctx, client.RelayRequest{Transaction: fb}); !errors.Is(err, apierr.TransactionSignatureInvalid) {
		t.Fatalf("POST /v1/transactions signed by another key: %v, want 2062", err)
	}
	if err := tron.SignTransaction(tx, wallet); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(tx)
	got, err := c.key.RelayTransaction(ctx, client.RelayRequest{Transaction: body})
	if err != nil || got.Order.Transaction == nil || got.Order.Transaction.TxID != tx.TxID {
		t.Fatalf("POST /v1/transactions: %v (%+v)", err, got.Order)
	}
	return got.Order.ID
}
