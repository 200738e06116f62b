package webhooksig_test

import (
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"rental/schemas/webhooksig"
)

type vector struct {
	Name, Secret, Timestamp, Body, Signature string
}

func vectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 4 {
		t.Fatalf("only %d vectors", len(vs))
	}
	return vs
}

// TestGoldenVectors: Sign agrees with Node's crypto HMAC on every vector, and Verify
// accepts each at its own timestamp.
func TestGoldenVectors(t *testing.T) {
	for _, v := range vectors(t) {
		if got := webhooksig.Sign(v.Secret, v.Timestamp, []byte(v.Body)); got != v.Signature {
			t.Errorf("%s: Sign = %s, Node computed %s", v.Name, got, v.Signature)
		}
		ts, _ := strconv.ParseInt(v.Timestamp, 10, 64)
		if err := webhooksig.Verify(v.Secret, v.Timestamp, []byte(v.Body), v.Signature, time.Unix(ts, 0)); err != nil {
			t.Errorf("%s: Verify: %v", v.Name, err)
		}
	}
}

func TestVerifyRefuses(t *testing.T) {
	v := vectors(t)[0]
	ts, _ := strconv.ParseInt(v.Timestamp, 10, 64)
	at := time.Unix(ts, 0)
	body := []byte(v.Body)
	cases := []struct {
		name          string
		secret, stamp string
		body          []byte
		sig           string
		now           time.Time
		want          error
	}{
		{"ok at +300s", v.Secret, v.Timestamp, body, v.Signature, at.Add(300 * time.Second), nil},
		{"ok at -300s", v.Secret, v.Timestamp, body, v.Signature, at.Add(-300 * time.Second), nil},
		{"late by 301s", v.Secret, v.Timestamp, body, v.Signature, at.Add(301 * time.Second), webhooksig.ErrSkew},
		{"early by 301s", v.Secret, v.Timestamp, body, v.Signature, at.Add(-301 * time.Second), webhooksig.ErrSkew},
		{"other secret", v.Secret + "x", v.Timestamp, body, v.Signature, at, webhooksig.ErrSignature},
		{"body changed by a byte", v.Secret, v.Timestamp, append([]byte(v.Body), ' '), v.Signature, at, webhooksig.ErrSignature},
		{"timestamp changed", v.Secret, strconv.FormatInt(ts+1, 10), body, v.Signature, at, webhooksig.ErrSignature},
		{"signature not base64", v.Secret, v.Timestamp, body, "***", at, webhooksig.ErrSignature},
		{"signature truncated", v.Secret, v.Timestamp, body, v.Signature[:20], at, webhooksig.ErrSignature},
		{"timestamp in ISO form", v.Secret, "2026-01-01T00:00:00Z", body, v.Signature, at, webhooksig.ErrTimestamp},
		{"timestamp in milliseconds", v.Secret, v.Timestamp + "000", body, v.Signature, at, webhooksig.ErrSkew},
		{"missing signature", v.Secret, v.Timestamp, body, "", at, webhooksig.ErrMissing},
		{"missing timestamp", v.Secret, "", body, v.Signature, at, webhooksig.ErrMissing},
	}
	for _, c := range cases {
		err := webhooksig.Verify(c.secret, c.stamp, c.body, c.sig, c.now)
		if !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}
