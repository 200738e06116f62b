package pricestore_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"rental/infra/pricestore"
	"rental/infra/testenv"
	"rental/schemas/network"
	"rental/schemas/pricing"
)

func TestSeedIsTheDocumentedDefaultModel(t *testing.T) {
	db := testenv.Postgres(t)
	s := pricestore.New(db.Pool)
	for _, n := range []network.Network{network.Mainnet, network.Nile} {
		m, err := s.Load(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		if want := pricing.DefaultModel(n); !reflect.DeepEqual(m, want) {
			t.Fatalf("%s seed differs from pricing.DefaultModel:\n got %+v\nwant %+v", n, m, want)
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("%s seed invalid: %v", n, err)
		}
	}
}

func TestEditsBumpTheRevisionAndInvalidEditsAreRefused(t *testing.T) {
	db := testenv.Postgres(t)
	s := pricestore.New(db.Pool)
	ctx := context.Background()
	e1h := pricing.BookKey{Resource: pricing.Energy, Tier: pricing.Tier1h}

	m, err := s.SetVolumeSteps(ctx, network.Mainnet, e1h, []pricing.VolumeStep{{MinAmount: 100_000, Price: 7400}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Revision <= 1 || len(m.Rows[4].VolumeSteps) != 1 || m.Rows[4].VolumeSteps[0].Price != 7400 {
		t.Fatalf("after set-volume: rev %d steps %+v", m.Revision, m.Rows[4].VolumeSteps)
	}
	rev := m.Revision

	// Plain SQL edits are tracked too.
	if _, err := db.Pool.Exec(ctx, `UPDATE price_rows SET base_price_centisun = 7700 WHERE network = 'mainnet' AND resource = 'energy' AND tier = '1h'`); err != nil {
		t.Fatal(err)
	}
	m, err = s.Load(ctx, network.Mainnet)
	if err != nil || m.Revision != rev+1 || m.Rows[4].BasePrice != 7700 {
		t.Fatalf("after SQL edit: rev %d base %s %v", m.Revision, m.Rows[4].BasePrice, err)
	}
	rev = m.Revision

	refused := map[string]func() error{
		"schedule with a gap": func() error {
			_, err := s.SetSchedule(ctx, network.Mainnet, []pricing.DayPart{{ID: "a", StartMinute: 0, EndMinute: 600, FactorBPS: 10_000}, {ID: "b", StartMinute: 700, EndMinute: 1440, FactorBPS: 10_000}})
			return err
		},
		"step raising the price": func() error {
			_, err := s.SetVolumeSteps(ctx, network.Mainnet, e1h, []pricing.VolumeStep{{MinAmount: 100_000, Price: 9000}})
			return err
		},
		"max below min": func() error { _, err := s.SetLimits(ctx, network.Mainnet, e1h, 50_000, 40_000); return err },
		"zero factor":   func() error { _, err := s.SetFactor(ctx, network.Mainnet, "night", 0); return err },
	}
	for name, f := range refused {
		if err := f(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := s.SetFactor(ctx, network.Mainnet, "lunch", 9000); !errors.Is(err, pricestore.ErrNotFound) {
		t.Errorf("unknown day part: %v", err)
	}
	if _, err := s.SetBasePrice(ctx, network.Mainnet, pricing.BookKey{Resource: pricing.Energy, Tier: pricing.Tier3d}, 100); !errors.Is(err, pricestore.ErrNotFound) {
		t.Errorf("retired tier row: %v", err)
	}
	m, err = s.Load(ctx, network.Mainnet)
	if err != nil || m.Revision != rev || m.DayParts[0].FactorBPS != 8500 || m.Rows[4].MinAmount != 32_000 {
		t.Fatalf("a refused edit changed the model: rev %d (want %d) %v", m.Revision, rev, err)
	}

	// The other network is untouched.
	nile, err := s.Load(ctx, network.Nile)
	if err != nil || !reflect.DeepEqual(nile, pricing.DefaultModel(network.Nile)) {
		t.Fatalf("nile changed: %+v %v", nile, err)
	}

	m, err = s.SetActivation(ctx, network.Mainnet, 2_000_000, true)
	if err != nil || m.ActivationPriceSun != 2_000_000 || !m.ActivationPaused {
		t.Fatalf("activation %+v %v", m, err)
	}
	m, err = s.SetPaymentAddresses(ctx, network.Mainnet, map[string]string{"energy_1h": "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"})
	if err != nil || m.PaymentAddresses["energy_1h"] == "" {
		t.Fatalf("payment addresses %+v %v", m.PaymentAddresses, err)
	}
}
