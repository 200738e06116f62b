package reqsign

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// FuzzAuthHeaders: the three signing headers as a client may send them. Parsing never
// panics; a timestamp that parses formats and parses back to the same instant; a sign
// value that decodes is exactly the base64 of 32 bytes; the canonical string is the plain
// concatenation the spec defines, so a signature made over it verifies.
func FuzzAuthHeaders(f *testing.F) {
	f.Add("2026-01-02T03:04:05.678Z", []byte("q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80="), "POST", "/v1/orders?x=1", []byte(`{"a":1}`))
	f.Add("2026-01-02T03:04:05+02:00", []byte("AAAA"), "get", "/v1/status", []byte{})
	f.Add("2026-13-02T03:04:05Z", []byte(""), "", "", []byte(nil))
	f.Add("0000-01-01T00:00:00Z", bytes.Repeat([]byte("A"), 100), "DELETE", "/", []byte{0})
	f.Fuzz(func(t *testing.T, ts string, sign []byte, method, target string, body []byte) {
		if tm, err := ParseTimestamp(ts); err == nil {
			back, err := ParseTimestamp(FormatTimestamp(tm))
			if err != nil || !back.Equal(tm.Truncate(time.Millisecond)) {
				t.Fatalf("timestamp %q -> %v -> %q -> %v (%v)", ts, tm, FormatTimestamp(tm), back, err)
			}
		}
		if sum, ok := DecodeSign(sign); ok && len(sum) != 32 {
			t.Fatalf("DecodeSign(%q) accepted %d bytes", sign, len(sum))
		}
		c := Canonical(nil, ts, method, target, body)
		if len(c) != len(ts)+len(strings.ToUpper(method))+len(target)+len(body) {
			t.Fatalf("canonical length %d", len(c))
		}
		sig := Sign("secret", ts, method, target, body)
		sum, ok := DecodeSign([]byte(sig))
		if !ok || !Equal(sum, Sum([]byte("secret"), c)) {
			t.Fatalf("own signature does not verify")
		}
	})
}
