package tron

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
)

func TestEnergyForBalance(t *testing.T) {
	const limit, weight = 180_000_000_000, 19_000_000_000
	for _, tc := range []struct{ sun, want int64 }{
		{0, 0},
		{SunPerTRX, 9},                   // 9.47 rounds down
		{1_000 * SunPerTRX, 9473},        // 9473.68
		{500_000 * SunPerTRX, 4_736_842}, // 4,736,842.1
		{1_500_000, 14},                  // fractional TRX counts, as in stake 2.0
		{100_000_000_000 * SunPerTRX, 947_368_421_052}, // product above int64: still exact
	} {
		got, err := EnergyForBalance(tc.sun, limit, weight)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("EnergyForBalance(%d) = %d, want %d", tc.sun, got, tc.want)
		}
	}
	if _, err := EnergyForBalance(SunPerTRX, limit, 0); !errors.Is(err, ErrNoEnergyWeight) {
		t.Fatalf("zero weight: %v", err)
	}
}

func TestBalanceForEnergyIsTheSmallestSufficientBalance(t *testing.T) {
	params := [][2]int64{{180_000_000_000, 19_000_000_000}, {90_000_000_000, 7}, {1, 3}, {math.MaxInt64 / 2, math.MaxInt64 / 3}}
	for _, p := range params {
		for _, e := range []int64{1, 2, 64_285, 130_285, 1_000_000, 123_456_789} {
			b, err := BalanceForEnergy(e, p[0], p[1])
			if err != nil {
				t.Fatal(err)
			}
			got, _ := EnergyForBalance(b, p[0], p[1])
			less, _ := EnergyForBalance(b-1, p[0], p[1])
			if got < e || less >= e {
				t.Errorf("limit %d weight %d energy %d: balance %d gives %d, balance-1 gives %d", p[0], p[1], e, b, got, less)
			}
		}
	}
	if b, err := BalanceForEnergy(0, 1, 1); err != nil || b != 0 {
		t.Fatalf("zero energy: %d %v", b, err)
	}
	if _, err := BalanceForEnergy(1, 0, 1); !errors.Is(err, ErrNoEnergyWeight) {
		t.Fatalf("zero limit: %v", err)
	}
}

func TestDecodeTransferLog(t *testing.T) {
	usdt := MustAddress(usdtB58)
	from, to := testKey(t, 1).Address(), testKey(t, 2).Address()
	big1 := new(big.Int).Lsh(big.NewInt(1), 200) // amounts beyond int64 survive
	lg, err := TransferLog(usdt, from, to, big1)
	if err != nil {
		t.Fatal(err)
	}
	if lg.Topics[0] != "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef" {
		t.Fatalf("Transfer topic %s", lg.Topics[0])
	}
	// visible=true prints the log address as Base58Check; both forms decode.
	for _, addr := range []string{lg.Address, usdt.String(), usdt.Hex()} {
		l := lg
		l.Address = addr
		ev, ok, err := DecodeTransferLog(l)
		if err != nil || !ok || ev.Token != usdt || ev.From != from || ev.To != to || ev.Amount.Cmp(big1) != 0 {
			t.Fatalf("address form %q: %+v %v %v", addr, ev, ok, err)
		}
	}
	// Approval(owner, spender, value) is another event: not a transfer, not an error.
	approval := lg
	approval.Topics = append([]string{"8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925"}, lg.Topics[1:]...)
	if _, ok, err := DecodeTransferLog(approval); ok || err != nil {
		t.Fatalf("Approval: ok=%v err=%v", ok, err)
	}
	// A TRC-721 Transfer has the token id as a third topic.
	nft := lg
	nft.Topics = append(append([]string(nil), lg.Topics...), strings.Repeat("0", 64))
	nft.Data = ""
	if _, ok, err := DecodeTransferLog(nft); ok || err != nil {
		t.Fatalf("TRC-721 Transfer: ok=%v err=%v", ok, err)
	}
	// A Transfer whose words are malformed is an error, not silently skipped.
	bad := lg
	bad.Data = "00"
	if _, _, err := DecodeTransferLog(bad); !errors.Is(err, ErrABI) {
		t.Fatalf("short data: %v", err)
	}
	bad = lg
	bad.Topics = []string{lg.Topics[0], "ff" + lg.Topics[1][2:], lg.Topics[2]}
	if _, _, err := DecodeTransferLog(bad); !errors.Is(err, ErrABI) {
		t.Fatalf("dirty address word: %v", err)
	}
}

func TestTRC20Encoding(t *testing.T) {
	to := testKey(t, 2).Address()
	tooBig := new(big.Int).Lsh(big.NewInt(1), 256)
	if _, err := TRC20TransferData(to, tooBig); !errors.Is(err, ErrABI) {
		t.Fatalf("2^256: %v", err)
	}
	if _, err := TRC20TransferData(to, big.NewInt(-1)); !errors.Is(err, ErrABI) {
		t.Fatalf("negative: %v", err)
	}
	p, err := TRC20TransferParameter(to, big.NewInt(1))
	if err != nil || len(p) != 128 || !strings.HasSuffix(p, "01") || !strings.Contains(p, to.Hex()[2:]) {
		t.Fatalf("parameter %s %v", p, err)
	}
	if TRC20BalanceOfParameter(to) != strings.Repeat("0", 24)+to.Hex()[2:] {
		t.Fatal("balanceOf parameter")
	}
	if _, _, err := ParseTRC20TransferData(TRC20BalanceOfData(to)); !errors.Is(err, ErrABI) {
		t.Fatalf("balanceOf data parsed as transfer: %v", err)
	}
}
