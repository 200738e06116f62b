package tron

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Fuzz targets of what the node and clients send us (docs/reliability.md "Fuzzing").
// `go test` runs the seeds (and testdata/fuzz); explore one with
// go test -run '^$' -fuzz FuzzUnmarshalRawData -fuzztime 60s ./infra/tron/

// FuzzUnmarshalRawData: transaction decoding accepts only canonical bytes, so whatever it
// accepts re-encodes to exactly the same bytes, and never panics.
func FuzzUnmarshalRawData(f *testing.F) {
	to, _ := ParseAddress("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t")
	from, _ := ParseAddress("TMVQGm1qAQYVdetCeGRRkTWYYrLXuHK2HC")
	r := &RawData{RefBlockBytes: []byte{1, 2}, RefBlockHash: bytes.Repeat([]byte{3}, 8), Expiration: 1_700_000_060_000,
		Timestamp: 1_700_000_000_123, Contract: &DelegateResourceContract{OwnerAddress: from, ReceiverAddress: to, Balance: 1_000_000, Resource: Energy}}
	if b, err := r.Marshal(); err == nil {
		f.Add(b)
	}
	r.PermissionID = 3
	r.Contract = &AccountPermissionUpdateContract{OwnerAddress: from,
		OwnerPerm: &Permission{Name: "owner", Threshold: 1, Keys: []PermissionKey{{Address: from[:], Weight: 1}}},
		Actives: []Permission{{Type: PermissionActive, ID: 2, Name: "delegate", Threshold: 1,
			Operations: Operations(DelegateResourceContractType, UnDelegateResourceContractType), Keys: []PermissionKey{{Address: to[:], Weight: 1}}}}}
	if b, err := r.Marshal(); err == nil {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0x01})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := UnmarshalRawData(b)
		if err != nil {
			return
		}
		again, err := r.Marshal()
		if err != nil {
			t.Fatalf("decoded %x but cannot re-encode: %v", b, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("decode/encode not exact:\n in %x\nout %x", b, again)
		}
		if _, err := r.JSON(true); err != nil {
			t.Fatalf("decoded %x but cannot render JSON: %v", b, err)
		}
	})
}

// FuzzParseRawDataJSON: java-tron's raw_data JSON; what parses marshals and decodes back.
func FuzzParseRawDataJSON(f *testing.F) {
	f.Add([]byte(`{"contract":[{"parameter":{"value":{"owner_address":"TMVQGm1qAQYVdetCeGRRkTWYYrLXuHK2HC","receiver_address":"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t","balance":1000000,"resource":"ENERGY"},"type_url":"type.googleapis.com/protocol.DelegateResourceContract"},"type":"DelegateResourceContract"}],"ref_block_bytes":"0102","ref_block_hash":"0303030303030303","expiration":1700000060000,"timestamp":1700000000123}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"contract":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRawDataJSON(b)
		if err != nil {
			return
		}
		enc, err := r.Marshal()
		if err != nil {
			return // JSON may carry values the canonical encoding refuses
		}
		if _, err := UnmarshalRawData(enc); err != nil {
			t.Fatalf("parsed JSON %s, encoded %x, which does not decode: %v", b, enc, err)
		}
	})
}

// FuzzTRC20Data: a transfer's call data and a uint256 result never panic the decoders.
func FuzzTRC20Data(f *testing.F) {
	f.Add([]byte{0xa9, 0x05, 0x9c, 0xbb}, "00000000000000000000000000000000000000000000000000000000000f4240")
	f.Add(append([]byte{0xa9, 0x05, 0x9c, 0xbb}, make([]byte, 64)...), "")
	f.Add([]byte{}, "zz")
	f.Fuzz(func(t *testing.T, data []byte, result string) {
		if _, v, err := ParseTRC20TransferData(data); err == nil {
			if v == nil || v.Sign() < 0 {
				t.Fatalf("accepted %x with amount %v", data, v)
			}
		}
		if v, err := DecodeUint256(result); err == nil && v.Sign() < 0 {
			t.Fatalf("DecodeUint256(%q) = %v", result, v)
		}
		_ = hex.EncodeToString(data)
	})
}

// FuzzNodeAnswers: whatever a node answers, the client's calls return a value or an
// error, never panic (blocks, transaction infos, account resources).
func FuzzNodeAnswers(f *testing.F) {
	f.Add([]byte(`{"blockID":"00","block_header":{"raw_data":{"number":5,"parentHash":"00","timestamp":1700000000000}},"transactions":[]}`))
	f.Add([]byte(`{"id":"ab","blockNumber":5,"receipt":{"result":"SUCCESS"},"log":[{"address":"41","topics":["dd"],"data":"00"}]}`))
	f.Add([]byte(`{"EnergyLimit":1,"TotalEnergyLimit":90000000000,"TotalEnergyWeight":1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"Error":"class org.tron.core.exception.BadItemException"}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, answer []byte) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer)
		}))
		defer srv.Close()
		c := NewClient(srv.URL)
		ctx := context.Background()
		if b, err := c.GetBlockByNum(ctx, 5); err == nil && b != nil {
			_, _, _ = b.Number(), b.ParentHash(), b.Timestamp()
		}
		_, _ = c.GetTransactionInfoByID(ctx, "ab")
		_, _ = c.GetTransactionInfoByBlockNum(ctx, 5)
		addr, _ := ParseAddress("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t")
		_, _ = c.GetAccountResource(ctx, addr)
		_, _ = c.GetBlockByLimitNext(ctx, 5, 6)
	})
}

// FuzzChallengeSignature: signup and session challenges are signed with TIP-191 message
// signatures. VerifyMessageV2 never panics and accepts only the signer's address.
func FuzzChallengeSignature(f *testing.F) {
	k, err := GenerateKey()
	if err != nil {
		f.Fatal(err)
	}
	msg := []byte("example.com wants you to sign in with your TRON account")
	sig, err := k.SignMessageV2(msg)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg, sig)
	f.Add(msg, "0x"+sig)
	f.Add(msg, sig[:len(sig)-2]+"1b")
	f.Add([]byte{}, "")
	f.Add(msg, "zz")
	f.Fuzz(func(t *testing.T, m []byte, s string) {
		if VerifyMessageV2(m, s, k.Address()) == nil && (string(m) != string(msg)) {
			t.Fatalf("a signature over %q verified as one by the key over another message", m)
		}
	})
}
