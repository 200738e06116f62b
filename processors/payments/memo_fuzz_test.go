package payments

import (
	"testing"
	"unicode/utf8"

	"rental/infra/tron"
)

func FuzzMemoReceiver(f *testing.F) {
	for _, s := range []string{"", "TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL", "  TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL\n", "TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeM",
		"T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb", "41" + "00112233445566778899aabbccddeeff00112233", "hello", "\xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, ok := MemoReceiver(data)
		if ok {
			if a == zeroAddress || a.IsZero() {
				t.Fatalf("%q: the zero address accepted", data)
			}
			// What is accepted is exactly an address's text, spaces aside.
			if b, err := tron.ParseAddress(a.String()); err != nil || b != a {
				t.Fatalf("%q: %v %v", data, b, err)
			}
		}
		if m := MemoText(data); m != nil && (!utf8.ValidString(*m) || len(*m) > 200) {
			t.Fatalf("%q: memo text %q", data, *m)
		}
	})
}

func TestMemoReceiver(t *testing.T) {
	k, _ := tron.GenerateKey()
	for _, c := range []struct {
		memo string
		ok   bool
	}{
		{k.Address().String(), true},
		{" " + k.Address().String() + "\n", true},
		{k.Address().String()[:33] + "x", false},
		{"for " + k.Address().String(), false},
		{"", false},
		{"T9yD14Nj9j7xAB4dbGeiX9h8unkKHxuWwb", false}, // the zero address
	} {
		a, ok := MemoReceiver([]byte(c.memo))
		if ok != c.ok || (ok && a != k.Address()) {
			t.Fatalf("%q: %v %v", c.memo, a, ok)
		}
	}
}
