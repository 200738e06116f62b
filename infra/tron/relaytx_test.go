package tron

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

// relaySample is a USDT transfer signed by key, as TronWeb hands it over.
func relaySample(t testing.TB, key PrivateKey, permission int32) []byte {
	t.Helper()
	usdt, _ := ParseAddress("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t")
	to, _ := ParseAddress("TMVQGm1qAQYVdetCeGRRkTWYYrLXuHK2HC")
	data, err := TRC20TransferData(to, big.NewInt(1_000_000))
	if err != nil {
		t.Fatal(err)
	}
	r := &RawData{RefBlockBytes: []byte{1, 2}, RefBlockHash: bytes.Repeat([]byte{3}, 8), Expiration: 1_700_000_060_000,
		Timestamp: 1_700_000_000_123, FeeLimit: 100_000_000, PermissionID: permission,
		Contract: &TriggerSmartContract{OwnerAddress: key.Address(), ContractAddress: usdt, Data: data}}
	tx, err := NewTransaction(r, false)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := r.Marshal()
	if err := sign(tx, raw, key); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(tx)
	return b
}

func TestParseRelayedRefusesEachBrokenPart(t *testing.T) {
	key, _ := GenerateKey()
	other, _ := GenerateKey()
	good := relaySample(t, key, 0)
	r, err := ParseRelayed(good)
	if err != nil {
		t.Fatalf("a TronWeb-shaped signed call: %v", err)
	}
	if r.Owner() != key.Address() || len(r.Signers) != 1 || r.Signers[0] != key.Address() {
		t.Fatalf("owner %s signers %v", r.Owner(), r.Signers)
	}
	if err := CheckSigners(r, &AccountPermissions{}); err != nil {
		t.Fatalf("owner's own signature, account without explicit permissions: %v", err)
	}
	var m map[string]any
	_ = json.Unmarshal(good, &m)
	edit := func(f func(map[string]any)) []byte {
		c := map[string]any{}
		for k, v := range m {
			c[k] = v
		}
		f(c)
		b, _ := json.Marshal(c)
		return b
	}
	hexStr := m["raw_data_hex"].(string)
	for _, c := range []struct {
		name   string
		body   []byte
		reason string
	}{
		{"not json", []byte(`{`), RelayUndecodable},
		{"no txID", edit(func(c map[string]any) { delete(c, "txID") }), RelayUndecodable},
		{"no hex", edit(func(c map[string]any) { delete(c, "raw_data_hex") }), RelayUndecodable},
		{"unsigned", edit(func(c map[string]any) { delete(c, "signature") }), RelayBadSignature},
		{"hex not hex", edit(func(c map[string]any) { c["raw_data_hex"] = "zz" }), RelayUndecodable},
		{"txid of other bytes", edit(func(c map[string]any) { c["txID"] = strings.Repeat("ab", 32) }), RelayMismatch},
		{"raw_data edited", edit(func(c map[string]any) {
			rd := c["raw_data"].(map[string]any)
			n := map[string]any{}
			for k, v := range rd {
				n[k] = v
			}
			n["fee_limit"] = 1
			c["raw_data"] = n
		}), RelayMismatch},
		{"hex truncated", edit(func(c map[string]any) { c["raw_data_hex"] = hexStr[:len(hexStr)-2] }), RelayUndecodable},
		{"signature short", edit(func(c map[string]any) { c["signature"] = []string{"00"} }), RelayBadSignature},
	} {
		if _, err := ParseRelayed(c.body); ErrRelayReason(err) != c.reason {
			t.Errorf("%s: %v, want reason %s", c.name, err, c.reason)
		}
	}
	// Signed by another key: parses (the signature recovers), refused for the owner.
	bad := relaySample(t, key, 0)
	var bm map[string]any
	_ = json.Unmarshal(bad, &bm)
	wrong := relaySample(t, other, 0) // same shape, other owner: reuse its signature
	var wm map[string]any
	_ = json.Unmarshal(wrong, &wm)
	bm["signature"] = wm["signature"]
	b, _ := json.Marshal(bm)
	r2, err := ParseRelayed(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSigners(r2, &AccountPermissions{Address: key.Address().String()}); ErrRelayReason(err) != RelayBadSignature {
		t.Fatalf("foreign signature: %v", err)
	}
	// Permission 2 of a multi-signature account: threshold 2 with one key signing is short;
	// an active permission without the TriggerSmartContract bit refuses.
	r3, err := ParseRelayed(relaySample(t, key, 2))
	if err != nil {
		t.Fatal(err)
	}
	keys := []SigningKey{{Address: key.Address().String(), Weight: 1}, {Address: other.Address().String(), Weight: 1}}
	perms := &AccountPermissions{Address: key.Address().String(), Active: []SigningPermission{{Type: "Active", ID: 2, Threshold: 2, Operations: allOperations, Keys: keys}}}
	if err := CheckSigners(r3, perms); ErrRelayReason(err) != RelayBadSignature || !strings.Contains(err.Error(), "threshold") {
		t.Fatalf("below threshold: %v", err)
	}
	perms.Active[0].Threshold = 1
	if err := CheckSigners(r3, perms); err != nil {
		t.Fatalf("threshold met: %v", err)
	}
	perms.Active[0].Operations = strings.Repeat("00", 32)
	if err := CheckSigners(r3, perms); ErrRelayReason(err) != RelayBadSignature {
		t.Fatalf("operation not allowed: %v", err)
	}
	perms.Active = nil
	if err := CheckSigners(r3, perms); ErrRelayReason(err) != RelayBadSignature {
		t.Fatalf("no permission 2: %v", err)
	}
	// Not a smart-contract call.
	tr := &RawData{RefBlockBytes: []byte{1, 2}, RefBlockHash: bytes.Repeat([]byte{3}, 8), Expiration: 1_700_000_060_000,
		Contract: &TransferContract{OwnerAddress: key.Address(), ToAddress: other.Address(), Amount: 1}}
	ttx, err := NewSignedTransaction(tr, false, key)
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := json.Marshal(ttx)
	if _, err := ParseRelayed(tb); ErrRelayReason(err) != RelayNotCall {
		t.Fatalf("TRX transfer: %v", err)
	}
}

// FuzzParseRelayed: whatever ParseRelayed accepts is a self-consistent signed call (txID
// is the hash of the bytes, raw_data encodes to them, one signer per signature), and it
// never panics.
func FuzzParseRelayed(f *testing.F) {
	key := PrivateKeyFromBytes(bytes.Repeat([]byte{7}, 32))
	f.Add(relaySample(f, key, 0))
	f.Add(relaySample(f, key, 2))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"txID":"","raw_data":{},"raw_data_hex":"","signature":["00"]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRelayed(b)
		if err != nil {
			if ErrRelayReason(err) == "" {
				t.Fatalf("refusal without a reason: %v", err)
			}
			return
		}
		if TxID(r.RawHex) != r.Tx.TxID {
			t.Fatalf("accepted a txID that is not the hash of its bytes")
		}
		again, err := r.Raw.Marshal()
		if err != nil || !bytes.Equal(again, r.RawHex) {
			t.Fatalf("accepted bytes that do not re-encode: %v", err)
		}
		if len(r.Signers) != len(r.Tx.Signature) || len(r.Signers) == 0 || r.Size() <= int64(len(r.RawHex)) {
			t.Fatalf("signers %d for %d signatures, size %d", len(r.Signers), len(r.Tx.Signature), r.Size())
		}
	})
}
