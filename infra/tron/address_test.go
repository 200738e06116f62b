package tron

import (
	"errors"
	"testing"
)

func TestAddressRoundTripAndForms(t *testing.T) {
	// USDT contract on mainnet, a well-known address with its published hex form.
	const b58 = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
	const hx = "41a614f803b6fd780986a42c78ec9c7f77e6ded13c"
	a, err := ParseAddress(b58)
	if err != nil {
		t.Fatal(err)
	}
	if a.Hex() != hx {
		t.Fatalf("hex = %s, want %s", a.Hex(), hx)
	}
	for _, in := range []string{hx, "0x" + hx} {
		b, err := ParseAddress(in)
		if err != nil || b != a {
			t.Fatalf("ParseAddress(%q) = %v, %v", in, b, err)
		}
	}
	if a.String() != b58 {
		t.Fatalf("String = %s", a.String())
	}
}

func TestAddressRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u", // checksum
		"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6",  // length
		"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj60", // 0 is not base58
		"42a614f803b6fd780986a42c78ec9c7f77e6ded13c", // prefix
		"41a614f803b6fd780986a42c78ec9c7f77e6ded13z", // not hex
		"0xa614f803b6fd780986a42c78ec9c7f77e6ded13c",
		"0x41a614f803b6fd780986a42c78ec9c7f77e6ded1", // 20 bytes behind 0x: once read as 41a6...d100
	} {
		if _, err := ParseAddress(in); !errors.Is(err, ErrInvalidAddress) {
			t.Errorf("ParseAddress(%q) err = %v, want ErrInvalidAddress", in, err)
		}
	}
}

func TestMessageSignRecover(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("hello tron")
	sig, err := k.SignMessageV2(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyMessageV2(msg, sig, k.Address()); err != nil {
		t.Fatal(err)
	}
	if err := VerifyMessageV2([]byte("hello troN"), sig, k.Address()); err == nil {
		t.Fatal("altered message verified")
	}
}
