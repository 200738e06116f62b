package tron

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseAddress: `go test` runs the seeds; explore with
// go test -run '^$' -fuzz FuzzParseAddress -fuzztime 60s ./infra/tron/
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{
		"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t",
		"TMVQGm1qAQYVdetCeGRRkTWYYrLXuHK2HC",
		"41a614f803b6fd780986a42c78ec9c7f77e6ded13c",
		"0x41a614f803b6fd780986a42c78ec9c7f77e6ded13c",
		"0X41A614F803B6FD780986A42C78EC9C7F77E6DED13C",
		"a614f803b6fd780986a42c78ec9c7f77e6ded13c",
		"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u",
		"T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb", // the burn ("black hole") address
		"1111111111111111111111111111111111",
		"TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT",
		"0x",
		"",
		"T",
		"41" + strings.Repeat("0", 40),
		"41" + strings.Repeat("g", 40),
		"0x0x" + strings.Repeat("4", 40),
		"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t\x00",
		"0X4100000000000000000000000000000000000000", // 20 bytes behind 0X; see testdata/fuzz
		"ТR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6",          // Cyrillic T
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidAddress) {
				t.Fatalf("ParseAddress(%q) error %v does not wrap ErrInvalidAddress", s, err)
			}
			if a != (Address{}) {
				t.Fatalf("ParseAddress(%q) failed but returned %x", s, a[:])
			}
			return
		}
		if a[0] != AddressPrefix {
			t.Fatalf("ParseAddress(%q) accepted prefix %#x", s, a[0])
		}
		b58, hx := a.String(), a.Hex()
		if len(b58) != 34 || b58[0] != 'T' {
			t.Fatalf("String() = %q", b58)
		}
		fromB58, err1 := ParseAddress(b58)
		fromHex, err2 := ParseAddress(hx)
		if err1 != nil || err2 != nil || fromB58 != a || fromHex != a {
			t.Fatalf("round trip of %q: %v %v", s, err1, err2)
		}
		// The input was one of the two forms of this very address.
		if s != b58 && !strings.EqualFold(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), hx) {
			t.Fatalf("ParseAddress(%q) = %s / %s: input is neither form", s, b58, hx)
		}
		if p, err := ParseAnyAddress(s); err != nil || p != a {
			t.Fatalf("ParseAnyAddress(%q) = %v, %v", s, p, err)
		}
	})
}
