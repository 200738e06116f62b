package signup

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"rental/infra/tron"
	"rental/schemas/network"
)

// ChallengeVectors is testdata/challenge_vectors.json, made by gen_challenge_vectors.js with
// TronWeb's signMessageV2.
type ChallengeVectors struct {
	Brand     string `json:"brand"`
	Host      string `json:"host"`
	Network   string `json:"network"`
	IssuedAt  string `json:"issued_at"`
	ExpiresAt string `json:"expires_at"`
	Vectors   []struct {
		Address                 string `json:"address"`
		Purpose                 string `json:"purpose"`
		Nonce                   string `json:"nonce"`
		Message                 string `json:"message"`
		Signature               string `json:"signature"`
		AlteredMessageSignature string `json:"altered_message_signature"`
	} `json:"vectors"`
}

func loadVectors(t *testing.T) ChallengeVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/challenge_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v ChallengeVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) < 3 {
		t.Fatal("too few vectors")
	}
	return v
}

// The Go template renders byte for byte what the generator signed, and TronWeb's
// signatures recover the address over exactly those bytes and not over the altered text.
func TestMessageMatchesTronWebVectors(t *testing.T) {
	v := loadVectors(t)
	issued, _ := time.Parse(time.RFC3339, v.IssuedAt)
	expires, _ := time.Parse(time.RFC3339, v.ExpiresAt)
	for _, vec := range v.Vectors {
		addr := tron.MustAddress(vec.Address)
		p, ok := ParsePurpose(vec.Purpose)
		if !ok {
			t.Fatalf("purpose %q", vec.Purpose)
		}
		got := Message(MessageParams{Brand: v.Brand, Host: v.Host, Network: network.Network(v.Network),
			Address: addr, Purpose: p, Nonce: vec.Nonce, IssuedAt: issued, ExpiresAt: expires})
		if got != vec.Message {
			t.Fatalf("template differs from the vector:\n got %q\nwant %q", got, vec.Message)
		}
		if err := tron.VerifyMessageV2([]byte(got), vec.Signature, addr); err != nil {
			t.Errorf("%s: TronWeb signature refused: %v", vec.Address, err)
		}
		if err := tron.VerifyMessageV2([]byte(got), vec.AlteredMessageSignature, addr); err == nil {
			t.Errorf("%s: signature over an altered message accepted", vec.Address)
		}
	}
}
