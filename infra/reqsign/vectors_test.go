package reqsign_test

import (
	"encoding/json"
	"os"
	"testing"

	"rental/infra/reqsign"
)

// The published request-signing vectors (schemas/vectors) hold for this package: the
// canonical string and the X-API-SIGN value of each, and ParseTimestamp accepts its
// timestamp.
func TestPublishedRequestSigningVectors(t *testing.T) {
	b, err := os.ReadFile("../../schemas/vectors/request-signing.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			Name, Secret, Timestamp, Method, Path, Query, Body string
			RequestTarget                                      string `json:"request_target"`
			Canonical, Signature                               string
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range f.Vectors {
		target := v.Path
		if v.Query != "" {
			target += "?" + v.Query
		}
		if target != v.RequestTarget {
			t.Errorf("%s: request target %q, vector says %q", v.Name, target, v.RequestTarget)
		}
		if got := string(reqsign.Canonical(nil, v.Timestamp, v.Method, target, []byte(v.Body))); got != v.Canonical {
			t.Errorf("%s: canonical %q, want %q", v.Name, got, v.Canonical)
		}
		if got := reqsign.Sign(v.Secret, v.Timestamp, v.Method, target, []byte(v.Body)); got != v.Signature {
			t.Errorf("%s: signature %s, want %s", v.Name, got, v.Signature)
		}
		if _, err := reqsign.ParseTimestamp(v.Timestamp); err != nil {
			t.Errorf("%s: timestamp: %v", v.Name, err)
		}
	}
}
