package openapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exampleBlock returns the example a description states: the vector it names
// (`(vector "NAME")`) and the `label: value` lines of its fenced block.
func exampleBlock(t *testing.T, where, desc string) (vector string, fields map[string]string) {
	t.Helper()
	m := regexp.MustCompile(`\(vector "([^"]+)"\):\s*\n\s*` + "```" + `\n((?s:.*?))\n\s*` + "```").FindStringSubmatch(desc)
	if m == nil {
		t.Fatalf("%s states no example naming a vector in a fenced block:\n%s", where, desc)
	}
	fields = map[string]string{}
	for _, line := range strings.Split(m[2], "\n") {
		label, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			t.Fatalf("%s: example line %q is not `label: value`", where, line)
		}
		fields[label] = strings.TrimLeft(value, " ")
	}
	return m[1], fields
}

func readVectors(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile("../vectors/" + name)
	if err != nil {
		t.Fatalf("the document links schemas/vectors/%s: %v", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func hmacBase64(secret, message string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(message))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// The request-signing rule the document states is the one the published vectors hold:
// the timestamp is ISO 8601 with milliseconds, the example in ApiSignature is a vector of
// schemas/vectors/request-signing.json field for field, its canonical string is the five
// parts joined with no separator, and its signature is HMAC-SHA256 of it, base64.
func TestSigningRuleMatchesTheVectors(t *testing.T) {
	doc := load(t)
	schemes := doc.Components.SecuritySchemes
	ts := schemes["ApiTimestamp"].Value.Description
	for _, want := range []string{"ISO 8601", "milliseconds", "not Unix time"} {
		if !strings.Contains(ts, want) {
			t.Errorf("ApiTimestamp does not say %q: %s", want, ts)
		}
	}
	sig := schemes["ApiSignature"].Value.Description
	for _, want := range []string{"canonical = X-API-TIMESTAMP + METHOD + path + query + body", "no separator", "schemas/vectors/request-signing.json", "as sent"} {
		if !strings.Contains(sig, want) {
			t.Errorf("ApiSignature does not say %q", want)
		}
	}
	var file struct {
		Vectors []struct {
			Name, Secret, Timestamp, Method, Path, Query, Body, Canonical, Signature string
			KeyID                                                                    string `json:"key_id"`
		} `json:"vectors"`
	}
	readVectors(t, "request-signing.json", &file)
	name, ex := exampleBlock(t, "ApiSignature", sig)
	for _, v := range file.Vectors {
		if v.Name != name {
			continue
		}
		target := v.Path
		if v.Query != "" {
			target += "?" + v.Query
		}
		want := map[string]string{
			"secret": v.Secret, "X-API-KEY": v.KeyID, "X-API-TIMESTAMP": v.Timestamp,
			"request": v.Method + " " + target, "body": v.Body, "canonical": v.Canonical, "X-API-SIGN": v.Signature,
		}
		for k, w := range want {
			if ex[k] != w {
				t.Errorf("ApiSignature example %s: %q, vector %q has %q", k, ex[k], name, w)
			}
		}
		if len(ex) != len(want) {
			t.Errorf("ApiSignature example has fields %v, want exactly %v", ex, want)
		}
		if _, err := time.Parse("2006-01-02T15:04:05.000Z", ex["X-API-TIMESTAMP"]); err != nil {
			t.Errorf("example timestamp is not ISO 8601 with milliseconds: %v", err)
		}
		if c := ex["X-API-TIMESTAMP"] + v.Method + target + ex["body"]; c != ex["canonical"] {
			t.Errorf("the rule as stated gives canonical %q, the example says %q", c, ex["canonical"])
		}
		if got := hmacBase64(ex["secret"], ex["canonical"]); got != ex["X-API-SIGN"] {
			t.Errorf("HMAC of the example's canonical is %s, the example says %s", got, ex["X-API-SIGN"])
		}
		return
	}
	t.Fatalf("ApiSignature names vector %q, which request-signing.json does not have", name)
}

// The webhook signature the document states is the one the published vectors hold: the
// WebhookSignature example is a vector of schemas/vectors/webhook-signing.json, its
// signature is HMAC-SHA256 over timestamp + "." + body, and the tolerance stated is the
// vectors' window.
func TestWebhookSigningRuleMatchesTheVectors(t *testing.T) {
	doc := load(t)
	desc := doc.Components.SecuritySchemes["WebhookSignature"].Value.Description
	var file struct {
		Window     int `json:"window_seconds"`
		Signatures []struct{ Name, Secret, Timestamp, Body, Signature string }
	}
	readVectors(t, "webhook-signing.json", &file)
	for _, want := range []string{`X-API-TIMESTAMP + "." + raw_body`, "schemas/vectors/webhook-signing.json", "constant-time",
		strconv.Itoa(file.Window) + " seconds"} {
		if !strings.Contains(desc, want) {
			t.Errorf("WebhookSignature does not say %q", want)
		}
	}
	if p := doc.Components.Parameters["DeliveryTimestamp"].Value.Description; !strings.Contains(p, strconv.Itoa(file.Window)+" seconds") {
		t.Errorf("the X-API-TIMESTAMP delivery header does not state the %d s tolerance: %s", file.Window, p)
	}
	name, ex := exampleBlock(t, "WebhookSignature", desc)
	for _, v := range file.Signatures {
		if v.Name != name {
			continue
		}
		want := map[string]string{"secret": v.Secret, "X-API-TIMESTAMP": v.Timestamp, "body": v.Body, "X-API-SIGN": v.Signature}
		for k, w := range want {
			if ex[k] != w {
				t.Errorf("WebhookSignature example %s: %q, vector %q has %q", k, ex[k], name, w)
			}
		}
		if len(ex) != len(want) {
			t.Errorf("WebhookSignature example has fields %v, want exactly %v", ex, want)
		}
		if got := hmacBase64(ex["secret"], ex["X-API-TIMESTAMP"]+"."+ex["body"]); got != ex["X-API-SIGN"] {
			t.Errorf("HMAC of the example is %s, the example says %s", got, ex["X-API-SIGN"])
		}
		return
	}
	t.Fatalf("WebhookSignature names vector %q, which webhook-signing.json does not have", name)
}
