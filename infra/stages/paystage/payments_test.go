package paystage

import (
	"testing"

	"rental/infra/deposits"
	paying "rental/schemas/payments"
)

// Every (resource, tier) slot has its own address, signed for by its own key, and none is
// an account's deposit address (those derive below payments.IndexBase).
func TestPaymentAddressesAreTheirOwn(t *testing.T) {
	addrs, err := Addresses(deposits.DevSeedHex)
	if err != nil {
		t.Fatal(err)
	}
	d, err := deposits.NewDeriver(deposits.DevSeedHex)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for a, x := range addrs {
		if x.Key.Address() != a || rows[x.RowKey] {
			t.Fatalf("%s: key of %s, row %s twice: %v", a, x.Key.Address(), x.RowKey, rows[x.RowKey])
		}
		rows[x.RowKey] = true
		res, tier, err := paying.ParseRowKey(x.RowKey)
		if err != nil {
			t.Fatal(err)
		}
		i, _ := paying.Index(res, tier)
		if pub, err := d.Address(i); err != nil || pub != a {
			t.Fatalf("%s: the public derivation gives %s (%v)", x.RowKey, pub, err)
		}
	}
	for i := uint32(0); i < 1000; i++ {
		a, err := d.Address(i)
		if err != nil {
			t.Fatal(err)
		}
		if _, clash := addrs[a]; clash {
			t.Fatalf("deposit address %d is a payment address", i)
		}
	}
	if len(rows) != 12 {
		t.Fatalf("%d payment addresses", len(rows))
	}
}
