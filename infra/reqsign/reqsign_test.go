package reqsign

import (
	"testing"
	"time"
)

// A fixed vector: any client implementation must reproduce it byte for byte.
func TestSignVector(t *testing.T) {
	got := Sign("sk_test_secret", "2026-01-02T03:04:05.678Z", "post", "/v1/orders?b=2&a=%20x", []byte(`{"amount":65000}`))
	c := string(Canonical(nil, "2026-01-02T03:04:05.678Z", "post", "/v1/orders?b=2&a=%20x", []byte(`{"amount":65000}`)))
	if c != `2026-01-02T03:04:05.678ZPOST/v1/orders?b=2&a=%20x{"amount":65000}` {
		t.Fatalf("canonical %q", c)
	}
	// echo -n '<canonical>' | openssl dgst -sha256 -hmac sk_test_secret -binary | base64
	const want = "5SavSQI1wGK0AgEkkstL64QAi8eVMzCdyMMq8YdfZ/Q="
	if got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	sum, ok := DecodeSign([]byte(got))
	if !ok || !Equal(sum, Sum([]byte("sk_test_secret"), []byte(c))) {
		t.Fatal("DecodeSign/Equal do not round-trip")
	}
}

func TestDecodeSignRejectsMalformed(t *testing.T) {
	for _, v := range []string{"", "abc", "5QULg/zcbQXtw58Vw+ncEx7rqKfwtSDCoXLWQp1P9PU", "5QULg_zcbQXtw58Vw-ncEx7rqKfwtSDCoXLWQp1P9PU=", "AAAA"} {
		if _, ok := DecodeSign([]byte(v)); ok {
			t.Errorf("DecodeSign(%q) accepted", v)
		}
	}
}

func TestTimestamp(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.UTC)
	s := FormatTimestamp(now)
	if s != "2026-01-02T03:04:05.678Z" {
		t.Fatalf("FormatTimestamp = %s", s)
	}
	got, err := ParseTimestamp(s)
	if err != nil || !got.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("ParseTimestamp = %v, %v", got, err)
	}
	for _, bad := range []string{"", "1767323045", "2026-01-02 03:04:05Z", "2026-01-02T03:04:05"} {
		if _, err := ParseTimestamp(bad); err == nil {
			t.Errorf("ParseTimestamp(%q) accepted", bad)
		}
	}
}
