package deposits

import (
	"strings"
	"testing"
)

// The edge's deriver takes an extended public key only: a private root (xprv or seed) is
// refused with where it belongs, and the xpub derives the same addresses as the root.
func TestPublicDeriverRefusesPrivateRoots(t *testing.T) {
	root, err := NewDeriver(DevSeedHex)
	if err != nil {
		t.Fatal(err)
	}
	for _, private := range []string{DevSeedHex, "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi"} {
		if _, err := NewPublicDeriver(private); err == nil || !strings.Contains(err.Error(), "belongs to the sweeper alone") {
			t.Fatalf("private root %.8s... accepted: %v", private, err)
		}
	}
	pub, err := NewPublicDeriver(root.XPub())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := root.Address(7)
	b, _ := pub.Address(7)
	if a != b {
		t.Fatalf("xpub derives %s, the root %s", b, a)
	}
}
