package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"rental/schemas/events"
)

func ptr[T any](v T) *T { return &v }

// The ledger's payloads validate against their JSON Schema files, and the schemas refuse
// what would break Semantics 9 and 10.
func TestLedgerPayloadsMatchTheirSchemas(t *testing.T) {
	credited := compile(t, "balancecredited.schema.json")
	tx := strings.Repeat("0f", 32)
	usdt := events.BalanceCredited{Reason: "deposit", Currency: "TRX", AmountSun: 33_830_000, TxHash: &tx, TxID: &tx,
		ReferenceID: ptr("dep_1"), Asset: "USDT", USDTAmount: ptr("10"), Rate: ptr(int64(3_383_000)), RateSource: ptr("fixed_env"),
		SpreadBps: ptr(50), Sender: ptr("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"), BlockNumber: ptr(int64(12))}
	if err := credited.Validate(instance(t, usdt)); err != nil {
		t.Fatalf("USDT deposit: %v", err)
	}
	refund := events.BalanceCredited{Reason: "refund", Currency: "TRX", AmountSun: 5, BalanceSun: ptr(int64(9)), ReferenceID: ptr("ord_1"), Asset: "TRX"}
	if err := credited.Validate(instance(t, refund)); err != nil {
		t.Fatalf("refund: %v", err)
	}
	bad := map[string]events.BalanceCredited{
		"TRX deposit with a rate":    {Reason: "deposit", Currency: "TRX", AmountSun: 1, TxHash: &tx, TxID: &tx, Asset: "TRX", Rate: ptr(int64(1))},
		"deposit with confirmations": {Reason: "deposit", Currency: "TRX", AmountSun: 1, TxHash: &tx, TxID: &tx, Asset: "TRX", Confirmations: ptr(19)},
		"refund without reference":   {Reason: "refund", Currency: "TRX", AmountSun: 1, Asset: "TRX"},
		"USDT without usdt_amount":   {Reason: "deposit", Currency: "TRX", AmountSun: 1, TxHash: &tx, TxID: &tx, Asset: "USDT", Rate: ptr(int64(1)), RateSource: ptr("fixed_env"), SpreadBps: ptr(1)},
	}
	for name, v := range bad {
		if err := credited.Validate(instance(t, v)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Every field is present even when null.
	b, _ := json.Marshal(refund)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if len(m) != 15 {
		t.Errorf("balance.credited has %d fields, want the spec's 15: %s", len(m), b)
	}

	if err := compile(t, "balancelow.schema.json").Validate(instance(t, events.BalanceLow{BalanceSun: 7, ThresholdSun: 10, EstimatedOrdersRemaining: 1})); err != nil {
		t.Errorf("balance.low: %v", err)
	}
	rot := compile(t, "depositaddressrotated.schema.json")
	first := events.DepositAddressRotated{Address: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", RotatedAt: events.Time(time.Now())}
	until := events.Time(time.Now().Add(time.Hour))
	next := events.DepositAddressRotated{Address: "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t", RetiredAddress: ptr("TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"),
		RetiredCreditUntil: &until, RotatedAt: events.Time(time.Now())}
	for _, v := range []events.DepositAddressRotated{first, next} {
		if err := rot.Validate(instance(t, v)); err != nil {
			t.Errorf("deposit_address.rotated %+v: %v", v, err)
		}
	}
}
