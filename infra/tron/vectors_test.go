package tron

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"strings"
	"testing"
)

// Golden vectors made by TronWeb (testdata/gen_vectors.js; see its header to regenerate).
type goldenVectors struct {
	Generator string `json:"generator"`
	Addresses []struct {
		PrivateKey string `json:"private_key"`
		Base58     string `json:"base58"`
		Hex        string `json:"hex"`
	} `json:"addresses"`
	Messages []struct {
		PrivateKey string `json:"private_key"`
		Address    string `json:"address"`
		Message    string `json:"message"`
		MessageHex string `json:"message_hex"`
		Signature  string `json:"signature"`
	} `json:"messages"`
	Transactions []struct {
		Name        string      `json:"name"`
		PrivateKey  string      `json:"private_key"`
		Owner       string      `json:"owner"`
		Transaction Transaction `json:"transaction"`
	} `json:"transactions"`
	ABI []struct {
		Function string `json:"function"`
		To       string `json:"to"`
		Owner    string `json:"owner"`
		Amount   string `json:"amount"`
		Data     string `json:"data"`
	} `json:"abi"`
}

func loadVectors(t *testing.T) goldenVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v goldenVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Addresses) == 0 || len(v.Messages) == 0 || len(v.Transactions) == 0 || len(v.ABI) == 0 {
		t.Fatal("vectors file is missing sections")
	}
	return v
}

func TestTronWebAddresses(t *testing.T) {
	for _, a := range loadVectors(t).Addresses {
		k, err := ParsePrivateKey(a.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Address(); got.String() != a.Base58 || got.Hex() != a.Hex {
			t.Errorf("key %s…: Go address %s / %s, TronWeb %s / %s", a.PrivateKey[:6], got, got.Hex(), a.Base58, a.Hex)
		}
		p1, err1 := ParseAddress(a.Base58)
		p2, err2 := ParseAddress(a.Hex)
		if err1 != nil || err2 != nil || p1 != p2 || p1 != k.Address() {
			t.Errorf("ParseAddress disagrees for %s: %v %v", a.Base58, err1, err2)
		}
	}
}

func TestTronWebMessageSignatures(t *testing.T) {
	for _, m := range loadVectors(t).Messages {
		msg, _ := hex.DecodeString(m.MessageHex)
		if string(msg) != m.Message {
			t.Fatalf("vector message_hex does not match message %q", m.Message)
		}
		want := MustAddress(m.Address)
		if err := VerifyMessageV2(msg, m.Signature, want); err != nil {
			t.Errorf("message %q: TronWeb signature rejected: %v", m.Message, err)
			continue
		}
		// Both sides use RFC 6979 with low S, so Go's signature is TronWeb's byte for byte.
		k, _ := ParsePrivateKey(m.PrivateKey)
		own, err := k.SignMessageV2(msg)
		if err != nil || own != m.Signature {
			t.Errorf("message %q: Go signature %s, TronWeb %s", m.Message, own, m.Signature)
		}
		sig, _ := hex.DecodeString(strings.TrimPrefix(m.Signature, "0x"))
		for i := range sig {
			bad := append([]byte(nil), sig...)
			bad[i] ^= 0x01
			if VerifyMessageV2(msg, "0x"+hex.EncodeToString(bad), want) == nil {
				t.Errorf("message %q: signature with byte %d altered still verifies", m.Message, i)
			}
		}
		if VerifyMessageV2(append(msg, ' '), m.Signature, want) == nil {
			t.Errorf("message %q: altered message verifies", m.Message)
		}
	}
}

func TestTronWebTransactions(t *testing.T) {
	for _, v := range loadVectors(t).Transactions {
		t.Run(v.Name, func(t *testing.T) {
			tw := v.Transaction
			// Go's encoding of TronWeb's raw_data JSON is TronWeb's raw_data_hex.
			r, err := ParseRawDataJSON(tw.RawData)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := r.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(raw); got != tw.RawDataHex {
				t.Fatalf("raw_data_hex\n go  %s\n tw  %s", got, tw.RawDataHex)
			}
			if TxID(raw) != tw.TxID {
				t.Fatalf("txID go %s, TronWeb %s", TxID(raw), tw.TxID)
			}
			// The bytes decode back to the same content, and re-render as JSON that parses
			// to the same bytes again, in both address forms.
			back, err := UnmarshalRawData(raw)
			if err != nil {
				t.Fatal(err)
			}
			for _, visible := range []bool{true, false} {
				built, err := NewTransaction(back, visible)
				if err != nil {
					t.Fatal(err)
				}
				if built.TxID != tw.TxID || built.RawDataHex != tw.RawDataHex {
					t.Fatalf("visible=%v: rebuilt transaction differs", visible)
				}
				if _, _, err := built.Decode(); err != nil {
					t.Fatalf("visible=%v: %v", visible, err)
				}
			}
			// TronWeb's signature verifies and names the owner.
			signers, err := VerifyTransaction(&tw)
			if err != nil {
				t.Fatal(err)
			}
			if signers[0] != MustAddress(v.Owner) || r.Contract.Owner() != signers[0] {
				t.Fatalf("signer %s, owner %s", signers[0], v.Owner)
			}
			// Go signs exactly as TronWeb does (both RFC 6979, low S, v = 27/28).
			k, _ := ParsePrivateKey(v.PrivateKey)
			mine := tw
			mine.Signature = nil
			if err := SignTransaction(&mine, k); err != nil {
				t.Fatal(err)
			}
			if !strings.EqualFold(mine.Signature[0], tw.Signature[0]) {
				t.Fatalf("signature go %s, TronWeb %s", mine.Signature[0], tw.Signature[0])
			}
			// Any altered signature byte fails (wrong signer, bad recovery id or no point).
			sig, _ := hex.DecodeString(tw.Signature[0])
			for i := range sig {
				bad := tw
				b := append([]byte(nil), sig...)
				b[i] ^= 0x04
				bad.Signature = []string{hex.EncodeToString(b)}
				if _, err := VerifyTransaction(&bad); err == nil {
					t.Fatalf("signature with byte %d altered verifies", i)
				}
			}
		})
	}
}

func TestTronWebABI(t *testing.T) {
	for _, a := range loadVectors(t).ABI {
		var got []byte
		switch a.Function {
		case "transfer(address,uint256)":
			amount, _ := new(big.Int).SetString(a.Amount, 10)
			var err error
			got, err = TRC20TransferData(MustAddress(a.To), amount)
			if err != nil {
				t.Fatal(err)
			}
			to, amt, err := ParseTRC20TransferData(got)
			if err != nil || to != MustAddress(a.To) || amt.Cmp(amount) != 0 {
				t.Errorf("ParseTRC20TransferData = %s %s %v", to, amt, err)
			}
		case "balanceOf(address)":
			got = TRC20BalanceOfData(MustAddress(a.Owner))
		default:
			t.Fatalf("unknown vector %s", a.Function)
		}
		if hex.EncodeToString(got) != a.Data {
			t.Errorf("%s\n go %x\n tw %s", a.Function, got, a.Data)
		}
	}
}

func TestTronWebTransactionTampering(t *testing.T) {
	v := loadVectors(t)
	var tx Transaction
	for _, x := range v.Transactions {
		if x.Name == "delegate_energy_locked" {
			tx = x.Transaction
		}
	}
	if tx.TxID == "" {
		t.Fatal("vector delegate_energy_locked missing")
	}
	// The JSON a node would re-pack at broadcast says something else than the signed hex.
	forged := tx
	forged.RawData = json.RawMessage(strings.Replace(string(tx.RawData), "2500000000", "2500000001", 1))
	if string(forged.RawData) == string(tx.RawData) {
		t.Fatal("test did not alter the JSON")
	}
	if _, err := VerifyTransaction(&forged); !errors.Is(err, ErrTxMismatch) {
		t.Fatalf("JSON/hex disagreement: err = %v, want ErrTxMismatch", err)
	}
	// A txID that is not the hash of the bytes.
	forged = tx
	forged.TxID = strings.Repeat("0", 64)
	if _, err := VerifyTransaction(&forged); !errors.Is(err, ErrTxMismatch) {
		t.Fatalf("wrong txID: err = %v, want ErrTxMismatch", err)
	}
}
