// Package webhooksig signs and verifies webhook deliveries (rental-api-v1 "Delivery
// headers"). Integrators verify with Verify; the deliverer signs with Sign, so both sides
// share one definition:
//
//	X-API-TIMESTAMP = unix seconds at send time (decimal)
//	X-API-SIGN      = base64(HMAC-SHA256(endpoint secret, timestamp + "." + raw body))
//
// The HMAC key is the whole secret string as returned by the API (prefix included), the
// base64 is standard and padded, and the body is the exact bytes received: verify before
// parsing, never over re-encoded JSON. testdata/vectors.json holds golden vectors computed
// independently with Node's crypto (testdata/gen_vectors.js).
package webhooksig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery.
const (
	HeaderTimestamp = "X-API-TIMESTAMP"
	HeaderSignature = "X-API-SIGN"
)

// Window is the replay window: a delivery whose timestamp is further than this from the
// receiver's clock, early or late, is refused.
const Window = 300 * time.Second

// Errors of Verify. Receivers answer any of them with a non-2xx status (the delivery is
// then retried) or drop the request; they never act on its body.
var (
	ErrMissing   = errors.New("webhooksig: X-API-TIMESTAMP or X-API-SIGN missing")
	ErrTimestamp = errors.New("webhooksig: X-API-TIMESTAMP is not unix seconds")
	ErrSkew      = errors.New("webhooksig: timestamp outside the ±300 s window")
	ErrSignature = errors.New("webhooksig: signature does not match")
)

// Sign returns the X-API-SIGN value for body sent at timestamp (the X-API-TIMESTAMP value).
func Sign(secret, timestamp string, body []byte) string {
	return base64.StdEncoding.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Timestamp formats t as an X-API-TIMESTAMP value.
func Timestamp(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// Verify checks a delivery: timestamp and signature are the X-API-TIMESTAMP and X-API-SIGN
// header values, body the raw bytes received, now the receiver's clock. It returns nil only
// when the timestamp is within Window of now and the signature is the HMAC of exactly
// these bytes under secret (compared in constant time). During a secret rotation, call it
// with the new secret and then the old one.
func Verify(secret, timestamp string, body []byte, signature string, now time.Time) error {
	timestamp, signature = strings.TrimSpace(timestamp), strings.TrimSpace(signature)
	if timestamp == "" || signature == "" {
		return ErrMissing
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || ts < 0 {
		return ErrTimestamp
	}
	skew := now.Unix() - ts
	if skew > int64(Window/time.Second) || skew < -int64(Window/time.Second) {
		return ErrSkew
	}
	got, err := base64.StdEncoding.DecodeString(signature)
	if err != nil || len(got) != sha256.Size {
		return ErrSignature
	}
	if !hmac.Equal(got, mac(secret, timestamp, body)) {
		return ErrSignature
	}
	return nil
}
