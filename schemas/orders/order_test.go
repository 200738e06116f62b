package orders

import "testing"

func TestLockPeriodCoversTheTierWithinTheCap(t *testing.T) {
	cases := []struct {
		seconds, cap, want int64
		err                bool
	}{
		{300, 864_000, 100, false},           // 5m
		{3600, 864_000, 1200, false},         // 1h
		{301, 864_000, 101, false},           // a partial block still needs a whole block
		{86400 * 5, 144_000, 144_000, false}, // exactly the nile cap
		{86400*5 + 3, 144_000, 0, true},      // one block over the nile cap
		{0, 864_000, 0, true},
	}
	for _, c := range cases {
		got, err := LockPeriodBlocks(c.seconds, c.cap)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("LockPeriodBlocks(%d, %d) = %d, %v; want %d, error %v", c.seconds, c.cap, got, err, c.want, c.err)
		}
	}
}

func TestProRataRefund(t *testing.T) {
	cases := []struct{ sun, amount, delivered, want int64 }{
		{5_362_500, 65_000, 65_000, 0},
		{5_362_500, 65_000, 0, 5_362_500},
		{5_362_500, 65_000, 32_500, 2_681_250},
		{1_000_001, 3, 1, 666_667},                   // 1,000,001 × 2 / 3 = 666,667.33 rounded down
		{1 << 62, 1 << 40, 1, (1 << 62) - (1 << 22)}, // no overflow in the product
	}
	for _, c := range cases {
		if got := ProRataRefund(c.sun, c.amount, c.delivered); got != c.want {
			t.Errorf("ProRataRefund(%d, %d, %d) = %d, want %d", c.sun, c.amount, c.delivered, got, c.want)
		}
	}
}

func TestTerminalAndInFlight(t *testing.T) {
	for _, s := range Statuses {
		if s.Terminal() && s.InFlight() {
			t.Errorf("%s is both terminal and in flight", s)
		}
	}
	for _, s := range []Status{Expired, Reclaimed, Failed, Refunded} {
		if !s.Terminal() {
			t.Errorf("%s should be terminal", s)
		}
	}
	if _, ok := ParseStatus("cancelled"); ok {
		t.Error("cancelled is not an order status")
	}
}
