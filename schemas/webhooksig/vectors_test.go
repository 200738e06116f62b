package webhooksig_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"rental/schemas/webhooksig"
)

// The published webhook-signing vectors (schemas/vectors) hold for Sign and Verify.
func TestPublishedWebhookSigningVectors(t *testing.T) {
	b, err := os.ReadFile("../vectors/webhook-signing.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Window     int64 `json:"window_seconds"`
		Signatures []struct {
			Name, Secret, Timestamp, Body, Signature string
		}
		Verify []struct {
			Name, Secret, Timestamp, Body, Signature string
			Now                                      int64
			Valid                                    bool
		}
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if time.Duration(f.Window)*time.Second != webhooksig.Window {
		t.Errorf("vectors' window %d s, package %s", f.Window, webhooksig.Window)
	}
	if len(f.Signatures) == 0 || len(f.Verify) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range f.Signatures {
		if got := webhooksig.Sign(v.Secret, v.Timestamp, []byte(v.Body)); got != v.Signature {
			t.Errorf("%s: Sign = %s, want %s", v.Name, got, v.Signature)
		}
	}
	for _, v := range f.Verify {
		err := webhooksig.Verify(v.Secret, v.Timestamp, []byte(v.Body), v.Signature, time.Unix(v.Now, 0))
		if (err == nil) != v.Valid {
			t.Errorf("%s: Verify = %v, want valid %v", v.Name, err, v.Valid)
		}
	}
}
