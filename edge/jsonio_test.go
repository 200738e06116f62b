package edge

import (
	"context"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

type quoteBody struct {
	Resource string `json:"resource"`
	Amount   int64  `json:"amount"`
	Receiver *struct {
		Address string `json:"address"`
	} `json:"receiver"`
	Tags []string `json:"tags"`
}

// decodeServer routes POST /v1/quotes to a handler that decodes with DecodeJSON and echoes.
func decodeServer(t *testing.T, opts ...serverOpt) *testServer {
	return startServer(t, append(opts, withHandler("POST /v1/quotes", func(_ context.Context, rc *fasthttp.RequestCtx) error {
		var b quoteBody
		if err := DecodeJSON(rc, &b); err != nil {
			return err
		}
		if b.Resource == "" {
			return Invalid("resource", "required", "resource is required")
		}
		return WriteJSON(rc, fasthttp.StatusCreated, b)
	}))...)
}

func TestDecodeJSON(t *testing.T) {
	ts := decodeServer(t)
	const ct = "application/json"

	t.Run("valid body", func(t *testing.T) {
		r := ts.do(t, "POST", "/v1/quotes", "application/json; charset=UTF-8", `{"resource":"energy","amount":65000,"receiver":{"address":"T1"}}`)
		if r.status != 201 || r.json["amount"] != float64(65000) || r.header.Get("Content-Type") != "application/json; charset=utf-8" {
			t.Fatalf("HTTP %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
		}
	})

	cases := []struct {
		name, contentType, body string
		code                    float64
		slug                    string
		field                   any
		constraint              any
	}{
		{"no content type", "", `{"resource":"energy"}`, 2000, "malformed_json", nil, "content_type"},
		{"form content type", "application/x-www-form-urlencoded", `resource=energy`, 2000, "malformed_json", nil, "content_type"},
		{"text/plain JSON", "text/plain", `{"resource":"energy"}`, 2000, "malformed_json", nil, "content_type"},
		{"latin1 charset", "application/json; charset=iso-8859-1", `{"resource":"energy"}`, 2000, "malformed_json", nil, "content_type"},
		{"empty body", ct, ``, 2000, "malformed_json", nil, nil},
		{"truncated", ct, `{"resource":"ene`, 2000, "malformed_json", nil, nil},
		{"syntax error", ct, `{"resource":energy}`, 2000, "malformed_json", nil, nil},
		{"trailing data", ct, `{"resource":"energy"} {"x":1}`, 2000, "malformed_json", nil, nil},
		{"unknown field", ct, `{"resource":"energy","amout":5}`, 2001, "validation_failed", "amout", "unknown_field"},
		{"unknown nested field", ct, `{"resource":"energy","receiver":{"adress":"T1"}}`, 2001, "validation_failed", "adress", "unknown_field"},
		{"string for integer", ct, `{"resource":"energy","amount":"65000"}`, 2001, "validation_failed", "amount", "type"},
		{"fraction for integer", ct, `{"resource":"energy","amount":1.5}`, 2001, "validation_failed", "amount", "type"},
		{"overflowing integer", ct, `{"resource":"energy","amount":99999999999999999999}`, 2001, "validation_failed", "amount", "type"},
		{"nested wrong type", ct, `{"resource":"energy","receiver":{"address":7}}`, 2001, "validation_failed", "receiver.address", "type"},
		{"array element wrong type", ct, `{"resource":"energy","tags":[1]}`, 2001, "validation_failed", "tags", "type"},
		{"array instead of object", ct, `[1,2]`, 2001, "validation_failed", nil, "type"},
		{"missing required field", ct, `{"amount":1}`, 2001, "validation_failed", "resource", "required"},
		{"duplicate key", ct, `{"resource":"energy","amount":65000,"amount":-1}`, 2000, "malformed_json", "amount", "duplicate_key"},
		{"duplicate nested key", ct, `{"resource":"energy","receiver":{"address":"T1","address":"T2"}}`, 2000, "malformed_json", "address", "duplicate_key"},
		{"differently cased key", ct, `{"resource":"energy","amount":65000,"AMOUNT":-1}`, 2001, "validation_failed", "AMOUNT", "unknown_field"},
		{"cased key alone", ct, `{"Resource":"energy"}`, 2001, "validation_failed", "Resource", "unknown_field"},
		{"cased nested key", ct, `{"resource":"energy","receiver":{"Address":"T1"}}`, 2001, "validation_failed", "Address", "unknown_field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.do(t, "POST", "/v1/quotes", c.contentType, c.body)
			e := wantError(t, r, 400, c.code, c.slug, c.field)
			d, _ := e["details"].(map[string]any)
			if c.constraint != nil && d["constraint"] != c.constraint {
				t.Errorf("details %v, want constraint %v", d, c.constraint)
			}
			if e["retryable"] != false {
				t.Errorf("2000-2099 must not be retryable: %v", e)
			}
		})
	}

	t.Run("type errors name the expected JSON type", func(t *testing.T) {
		r := ts.do(t, "POST", "/v1/quotes", ct, `{"amount":"x"}`)
		d, _ := envelopeOf(t, r)["details"].(map[string]any)
		if d["expected"] != "integer" {
			t.Errorf("details %v", d)
		}
	})
}

func TestBodyLimit(t *testing.T) {
	ts := decodeServer(t, withOptions(func(o *Options) { o.MaxBodyBytes = 1024 }))
	big := `{"resource":"` + strings.Repeat("e", 2000) + `"}`
	r := ts.do(t, "POST", "/v1/quotes", "application/json", big)
	e := wantError(t, r, 413, 2052, "body_too_large", "body")
	if d, _ := e["details"].(map[string]any); d["constraint"] != "max_bytes" || d["max_bytes"] != float64(1024) {
		t.Errorf("details %v", d)
	}
	// Under the limit still works.
	if r := ts.do(t, "POST", "/v1/quotes", "application/json", `{"resource":"energy"}`); r.status != 201 {
		t.Fatalf("HTTP %d: %s", r.status, r.body)
	}
}
