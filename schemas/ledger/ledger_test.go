package ledger

import (
	"errors"
	"math/big"
	"testing"

	"rental/schemas/apierr"
)

func TestUSDTParseFormat(t *testing.T) {
	for in, want := range map[string]string{"5": "5000000", "2000": "2000000000", "12.5": "12500000", "0.000001": "1"} {
		v, err := ParseUSDT(in)
		if err != nil || v.String() != want {
			t.Errorf("ParseUSDT(%q) = %v, %v; want %s", in, v, err, want)
		}
		if got := FormatUSDT(v); got != in {
			t.Errorf("FormatUSDT(%s) = %q, want %q", v, got, in)
		}
	}
	for _, bad := range []string{"", "-1", "1.0000001", "abc", ".5", "1e3"} {
		if _, err := ParseUSDT(bad); err == nil {
			t.Errorf("ParseUSDT(%q) accepted", bad)
		}
	}
}

func TestUSDTConversionIsIntegerAndRoundsDown(t *testing.T) {
	// 3.4 TRX per USDT, 50 bps spread: 3,383,000 SUN per USDT.
	after := RateAfterSpread(3_400_000, 50)
	if after != 3_383_000 {
		t.Fatalf("rate after spread %d", after)
	}
	sun, err := USDTToSun(big.NewInt(12_345_678), after) // 12.345678 USDT
	if err != nil || sun != 41_765_428 {                 // floor(12.345678 * 3.383) TRX in SUN
		t.Fatalf("USDTToSun = %d, %v", sun, err)
	}
	huge, _ := new(big.Int).SetString("1000000000000000000000000", 10)
	if _, err := USDTToSun(huge, after); err == nil {
		t.Fatal("overflowing conversion accepted")
	}
}

func TestClassify(t *testing.T) {
	l := USDTLimits{Min: big.NewInt(5_000_000), Max: big.NewInt(2_000_000_000)}
	cases := []struct {
		units int64
		rate  bool
		want  string
	}{
		{4_999_999, true, StatusHeldBelowMin}, {5_000_000, true, StatusCredited}, {2_000_000_000, true, StatusCredited},
		{2_000_000_001, true, StatusHeldForReview}, {10_000_000, false, StatusHeldNoRate},
	}
	for _, c := range cases {
		if got := ClassifyUSDT(big.NewInt(c.units), l, c.rate); got != c.want {
			t.Errorf("ClassifyUSDT(%d, rate %v) = %s, want %s", c.units, c.rate, got, c.want)
		}
	}
	if ClassifyTRX(999_999, 1_000_000) != StatusResidual || ClassifyTRX(1_000_000, 1_000_000) != StatusCredited {
		t.Error("ClassifyTRX boundary")
	}
}

func TestFundsError(t *testing.T) {
	e := FundsError(100, 80, 50)
	if !errors.Is(e, apierr.BalanceReserved) || e.Details["required_sun"] != int64(50) || e.Details["available_sun"] != int64(20) {
		t.Errorf("reserved case: %v %v", e, e.Details)
	}
	e = FundsError(40, 0, 50)
	if !errors.Is(e, apierr.InsufficientFunds) || e.Details["available_sun"] != int64(40) {
		t.Errorf("insufficient case: %v %v", e, e.Details)
	}
}

func TestLegsBalance(t *testing.T) {
	for _, k := range []Kind{KindDeposit, KindDepositReversal, KindCapture, KindRefund, KindAdjustment, KindReferral} {
		d, c, err := Legs(k, "acc_1")
		if err != nil || d == c {
			t.Errorf("%s: %s -> %s, %v", k, d, c, err)
		}
		if k.Credited() != (c == Customer("acc_1")) {
			t.Errorf("%s: Credited() disagrees with its legs", k)
		}
	}
	if ValidateAmount(0) == nil || ValidateAmount(MaxAmountSun+1) == nil || ValidateAmount(1) != nil {
		t.Error("ValidateAmount bounds")
	}
}
