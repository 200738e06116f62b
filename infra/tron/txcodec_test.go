package tron

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

func testKey(t *testing.T, seed byte) PrivateKey {
	t.Helper()
	b := make([]byte, 32)
	for i := range b {
		b[i] = seed
	}
	return PrivateKeyFromBytes(b)
}

var testNow = time.UnixMilli(1735689600000)

func delegateRaw(owner, receiver Address) *RawData {
	return &RawData{
		RefBlockBytes: []byte{0x7a, 0xc7},
		RefBlockHash:  []byte{1, 2, 3, 4, 5, 6, 7, 8},
		Expiration:    testNow.Add(time.Minute).UnixMilli(),
		Timestamp:     testNow.UnixMilli(),
		Contract: &DelegateResourceContract{
			OwnerAddress: owner, ReceiverAddress: receiver, Resource: Energy,
			Balance: 5_000_000_000, Lock: true, LockPeriod: 28_800,
		},
	}
}

func TestCheckBuiltAcceptsExactIntentAndSigns(t *testing.T) {
	owner, recv := testKey(t, 1), testKey(t, 2).Address()
	raw := delegateRaw(owner.Address(), recv)
	tx, err := NewTransaction(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	want := *raw.Contract.(*DelegateResourceContract)
	got, err := CheckBuilt(tx, Intent{Contract: &want, Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if got.Contract.(*DelegateResourceContract).LockPeriod != 28_800 {
		t.Fatal("decoded contract lost its lock period")
	}
	if err := SignTransaction(tx, owner); err != nil {
		t.Fatal(err)
	}
	signers, err := VerifyTransaction(tx)
	if err != nil || signers[0] != owner.Address() {
		t.Fatalf("VerifyTransaction = %v, %v", signers, err)
	}
	// The broadcast body carries raw_data exactly as built.
	body, _ := json.Marshal(tx)
	var back Transaction
	if err := json.Unmarshal(body, &back); err != nil || string(back.RawData) != string(tx.RawData) {
		t.Fatalf("raw_data changed through JSON: %v", err)
	}
}

func TestCheckBuiltRejectsWhatWasNotAskedFor(t *testing.T) {
	owner, recv, other := testKey(t, 1).Address(), testKey(t, 2).Address(), testKey(t, 3).Address()
	base := delegateRaw(owner, recv)
	intended := *base.Contract.(*DelegateResourceContract)

	for _, tc := range []struct {
		name   string
		mutate func(r *RawData)
		intent func(i *Intent)
	}{
		{"other receiver", func(r *RawData) { r.Contract.(*DelegateResourceContract).ReceiverAddress = other }, nil},
		{"larger balance", func(r *RawData) { r.Contract.(*DelegateResourceContract).Balance++ }, nil},
		{"bandwidth instead of energy", func(r *RawData) { r.Contract.(*DelegateResourceContract).Resource = Bandwidth }, nil},
		{"longer lock", func(r *RawData) { r.Contract.(*DelegateResourceContract).LockPeriod = 864_000 }, nil},
		{"unlocked", func(r *RawData) { r.Contract.(*DelegateResourceContract).Lock = false }, nil},
		{"different contract type", func(r *RawData) {
			r.Contract = &UnDelegateResourceContract{OwnerAddress: owner, ReceiverAddress: recv, Resource: Energy, Balance: 5_000_000_000}
		}, nil},
		{"permission id", func(r *RawData) { r.PermissionID = 2 }, nil},
		{"memo", func(r *RawData) { r.Data = []byte("x") }, nil},
		{"fee limit", func(r *RawData) { r.FeeLimit = 1 }, nil},
		{"expired", func(r *RawData) { r.Expiration = testNow.Add(-time.Second).UnixMilli() }, nil},
		{"expires too late", func(r *RawData) { r.Expiration = testNow.Add(25 * time.Hour).UnixMilli() }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := delegateRaw(owner, recv)
			c := *base.Contract.(*DelegateResourceContract)
			r.Contract = &c
			tc.mutate(r)
			tx, err := NewTransaction(r, true)
			if err != nil {
				t.Fatal(err)
			}
			want := intended
			if _, err := CheckBuilt(tx, Intent{Contract: &want, Now: testNow}); !errors.Is(err, ErrTxMismatch) {
				t.Fatalf("err = %v, want ErrTxMismatch", err)
			}
		})
	}
}

func TestDecodeCatchesInconsistentNodeAnswers(t *testing.T) {
	owner, recv := testKey(t, 1).Address(), testKey(t, 2).Address()
	tx, err := NewTransaction(delegateRaw(owner, recv), false)
	if err != nil {
		t.Fatal(err)
	}
	// raw_data JSON names a different receiver than raw_data_hex: the node would
	// re-pack the JSON at broadcast, so the signed bytes would not be what was checked.
	other := testKey(t, 3).Address()
	bad := *tx
	bad.RawData = json.RawMessage(strings.Replace(string(tx.RawData), recv.Hex(), other.Hex(), 1))
	if _, _, err := bad.Decode(); !errors.Is(err, ErrTxMismatch) {
		t.Fatalf("JSON/hex disagreement: %v", err)
	}
	// An unknown raw_data field is refused rather than ignored.
	bad = *tx
	bad.RawData = json.RawMessage(strings.Replace(string(tx.RawData), `{"contract"`, `{"auths":[],"contract"`, 1))
	if _, _, err := bad.Decode(); !errors.Is(err, ErrTxDecode) {
		t.Fatalf("unknown field: %v", err)
	}
	bad = *tx
	bad.RawDataHex = "zz"
	if _, _, err := bad.Decode(); !errors.Is(err, ErrTxDecode) {
		t.Fatalf("bad hex: %v", err)
	}
}

func TestUnmarshalRawDataStrict(t *testing.T) {
	owner, recv := testKey(t, 1).Address(), testKey(t, 2).Address()
	good, err := delegateRaw(owner, recv).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalRawData(good); err != nil {
		t.Fatal(err)
	}
	withField := func(num protowire.Number) []byte {
		b := append([]byte(nil), good...)
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, []byte{1})
	}
	contractOf := func(typ ContractType, value []byte) []byte {
		var anyMsg []byte
		anyMsg = protowire.AppendTag(anyMsg, 1, protowire.BytesType)
		anyMsg = protowire.AppendString(anyMsg, typ.TypeURL())
		anyMsg = appendBytes(anyMsg, 2, value)
		var c []byte
		c = appendVarint(c, 1, uint64(typ))
		c = protowire.AppendTag(c, 2, protowire.BytesType)
		c = protowire.AppendBytes(c, anyMsg)
		b := protowire.AppendTag(nil, 11, protowire.BytesType)
		return protowire.AppendBytes(b, c)
	}
	transfer := (&TransferContract{OwnerAddress: owner, ToAddress: recv, Amount: 1}).appendProto(nil)
	wrongURL := func() []byte {
		var anyMsg []byte
		anyMsg = protowire.AppendTag(anyMsg, 1, protowire.BytesType)
		anyMsg = protowire.AppendString(anyMsg, TriggerSmartContractType.TypeURL())
		anyMsg = appendBytes(anyMsg, 2, transfer)
		var c []byte
		c = appendVarint(c, 1, uint64(TransferContractType))
		c = protowire.AppendTag(c, 2, protowire.BytesType)
		c = protowire.AppendBytes(c, anyMsg)
		b := protowire.AppendTag(nil, 11, protowire.BytesType)
		return protowire.AppendBytes(b, c)
	}()
	for name, b := range map[string][]byte{
		"truncated":              good[:len(good)-1],
		"auths (9)":              withField(9),
		"scripts (12)":           withField(12),
		"two contracts":          append(append([]byte(nil), good...), contractOf(TransferContractType, transfer)...),
		"no contract":            appendVarint(nil, 8, 1),
		"unsupported type":       contractOf(ContractType(13), transfer), // WithdrawBalanceContract
		"type_url of other type": wrongURL,
		"unknown contract field": contractOf(TransferContractType, append(append([]byte(nil), transfer...), 0x38, 0x01)),
		"20-byte address":        contractOf(TransferContractType, appendBytes(nil, 1, owner[1:])),
		// expiration (8) after contract (11): valid protobuf, not java-tron's encoding.
		"fields out of order": append(contractOf(TransferContractType, transfer), appendVarint(nil, 8, 5)...),
	} {
		if _, err := UnmarshalRawData(b); !errors.Is(err, ErrTxDecode) {
			t.Errorf("%s: err = %v, want ErrTxDecode", name, err)
		}
	}
}

func TestSignTransactionRefusesForeignKey(t *testing.T) {
	owner, recv, stranger := testKey(t, 1), testKey(t, 2), testKey(t, 3)
	tx, err := NewTransaction(delegateRaw(owner.Address(), recv.Address()), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := SignTransaction(tx, stranger); !errors.Is(err, ErrTxMismatch) {
		t.Fatalf("stranger signed: %v", err)
	}
	if len(tx.Signature) != 0 {
		t.Fatal("a refused signing left a signature behind")
	}
	// A signature made by someone else over the right txID does not verify as the owner's.
	h, _ := hex.DecodeString(tx.TxID)
	sig, _ := stranger.SignHash(h)
	tx.Signature = []string{hex.EncodeToString(sig)}
	if _, err := VerifyTransaction(tx); err == nil {
		t.Fatal("stranger's signature verified")
	}
	tx.Signature = nil
	if _, err := VerifyTransaction(tx); err == nil {
		t.Fatal("unsigned transaction verified")
	}
}

func TestRawDataJSONShape(t *testing.T) {
	owner, recv := testKey(t, 1).Address(), testKey(t, 2).Address()
	r := delegateRaw(owner, recv)
	r.Contract.(*DelegateResourceContract).Resource = Bandwidth
	r.Contract.(*DelegateResourceContract).Lock = false
	r.Contract.(*DelegateResourceContract).LockPeriod = 0
	for _, visible := range []bool{true, false} {
		js, err := r.JSON(visible)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Contract []struct {
				Parameter struct {
					Value   map[string]any `json:"value"`
					TypeURL string         `json:"type_url"`
				} `json:"parameter"`
				Type string `json:"type"`
			} `json:"contract"`
			RefBlockBytes string `json:"ref_block_bytes"`
		}
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatal(err)
		}
		c := m.Contract[0]
		wantOwner := owner.Hex()
		if visible {
			wantOwner = owner.String()
		}
		if c.Type != "DelegateResourceContract" || c.Parameter.TypeURL != "type.googleapis.com/protocol.DelegateResourceContract" ||
			c.Parameter.Value["owner_address"] != wantOwner || m.RefBlockBytes != "7ac7" {
			t.Fatalf("visible=%v: unexpected JSON %s", visible, js)
		}
		// proto3 defaults are absent, as java-tron prints them.
		for _, k := range []string{"resource", "lock", "lock_period"} {
			if _, ok := c.Parameter.Value[k]; ok {
				t.Fatalf("visible=%v: default field %q printed: %s", visible, k, js)
			}
		}
	}
}

// NewSignedTransaction gives what NewTransaction and SignTransaction give (ECDSA here is
// deterministic, RFC 6979), and refuses a key that is not the owner's.
func TestNewSignedTransaction(t *testing.T) {
	owner, recv, stranger := testKey(t, 1), testKey(t, 2), testKey(t, 3)
	raw := delegateRaw(owner.Address(), recv.Address())
	got, err := NewSignedTransaction(raw, true, owner)
	if err != nil {
		t.Fatal(err)
	}
	want, err := NewTransaction(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := SignTransaction(want, owner); err != nil {
		t.Fatal(err)
	}
	if got.TxID != want.TxID || got.RawDataHex != want.RawDataHex || string(got.RawData) != string(want.RawData) ||
		len(got.Signature) != 1 || got.Signature[0] != want.Signature[0] {
		t.Fatalf("NewSignedTransaction = %+v, want %+v", got, want)
	}
	if signers, err := VerifyTransaction(got); err != nil || signers[0] != owner.Address() {
		t.Fatalf("VerifyTransaction = %v, %v", signers, err)
	}
	if _, err := NewSignedTransaction(raw, true, stranger); !errors.Is(err, ErrTxMismatch) {
		t.Fatalf("stranger signed: %v", err)
	}
}
