// Package reqsign is the request signature of rental-api-v1 ("Request signing"), shared by
// the edge that verifies it and by every client that makes it (tests, benchmarks, SDK
// examples). It is pure: no clock, no I/O.
//
//	canonical = X-API-TIMESTAMP value + METHOD + path + ("?" + raw query, if any) + raw body
//	X-API-SIGN = base64(HMAC-SHA256(secret, canonical))   (standard alphabet, padded)
//
// The path and query are the request-target exactly as sent on the wire (percent-encoding,
// parameter order and all); the HMAC key is the secret string as issued, including its
// sk_live_/sk_test_ prefix.
package reqsign

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"time"
)

// Header names of a signed request.
const (
	HeaderKey       = "X-API-KEY"
	HeaderTimestamp = "X-API-TIMESTAMP"
	HeaderSign      = "X-API-SIGN"
)

// MaxSkew is the accepted distance between X-API-TIMESTAMP and the server clock, early or
// late (1003 beyond it).
const MaxSkew = 5 * time.Second

// TimestampLayout is the form clients send: UTC, milliseconds, Z.
const TimestampLayout = "2006-01-02T15:04:05.000Z"

// FormatTimestamp renders t as an X-API-TIMESTAMP value.
func FormatTimestamp(t time.Time) string { return t.UTC().Format(TimestampLayout) }

// ErrTimestamp is returned for a value that is not an ISO 8601 (RFC 3339) date-time.
var ErrTimestamp = errors.New("reqsign: X-API-TIMESTAMP is not an ISO 8601 date-time such as 2026-01-02T03:04:05.678Z")

// ParseTimestamp reads an X-API-TIMESTAMP value: RFC 3339 with a time zone (Z or an
// offset) and optional fractional seconds. The signature covers the value verbatim, so a
// lenient parse cannot be abused.
func ParseTimestamp(v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, ErrTimestamp
	}
	return t, nil
}

// Canonical appends the canonical string to dst. requestTarget is the path plus, when
// present, "?" and the raw query, exactly as on the wire.
func Canonical(dst []byte, timestamp, method, requestTarget string, body []byte) []byte {
	dst = append(dst, timestamp...)
	dst = append(dst, strings.ToUpper(method)...)
	dst = append(dst, requestTarget...)
	return append(dst, body...)
}

// Sum returns the raw HMAC-SHA256 of canonical under secret.
func Sum(secret []byte, canonical []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(canonical)
	return m.Sum(nil)
}

// Sign returns the X-API-SIGN value for a request.
func Sign(secret, timestamp, method, requestTarget string, body []byte) string {
	c := Canonical(nil, timestamp, method, requestTarget, body)
	return base64.StdEncoding.EncodeToString(Sum([]byte(secret), c))
}

// Headers returns the three headers of a request signed at now.
func Headers(keyID, secret string, now time.Time, method, requestTarget string, body []byte) map[string]string {
	ts := FormatTimestamp(now)
	return map[string]string{
		HeaderKey:       keyID,
		HeaderTimestamp: ts,
		HeaderSign:      Sign(secret, ts, method, requestTarget, body),
	}
}

// DecodeSign decodes an X-API-SIGN value; ok is false unless it is the standard base64 of
// exactly 32 bytes.
func DecodeSign(v []byte) (sum []byte, ok bool) {
	// dst is sized for what v may decode to: Decode writes past a smaller one (values of 44
	// characters without padding, and longer ones, panicked here; the seeds are in
	// testdata/fuzz/FuzzAuthHeaders).
	if len(v) != base64.StdEncoding.EncodedLen(sha256.Size) {
		return nil, false
	}
	sum = make([]byte, base64.StdEncoding.DecodedLen(len(v)))
	n, err := base64.StdEncoding.Decode(sum, v)
	if err != nil || n != sha256.Size {
		return nil, false
	}
	return sum[:n], true
}

// Equal compares two MACs in constant time.
func Equal(a, b []byte) bool { return hmac.Equal(a, b) }
