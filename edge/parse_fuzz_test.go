package edge

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"rental/infra/orderstore"
	"rental/schemas/apierr"
)

// FuzzDecodeJSON: request bodies as DecodeJSON reads them for every endpoint (the quote
// body here; the walker is generic over the destination type). It never panics, refuses
// only with 2000 or 2001, and what it accepts has no key twice and no key that differs
// from a field's name only by case: re-encoding the decoded value and decoding the
// body leniently give the same value.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"resource":"energy","amount":65000}`, `{"amount":65000,"AMOUNT":-1}`,
		`{"resource":"energy","resource":"bandwidth"}`, `{"receiver":{"address":"T1","Address":"T2"}}`,
		`{"tags":["a","b"],"receiver":null}`, `[1]`, `{"resource":"\u0065nergy"}`, `{"a":{"a":{"a":1}}}`, `{`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var rc fasthttp.RequestCtx
		rc.Request.Header.SetContentType("application/json")
		rc.Request.SetBody(body)
		var strict quoteBody
		err := DecodeJSON(&rc, &strict)
		if err != nil {
			var e *apierr.Error
			if !errors.As(err, &e) || (e.Code != apierr.MalformedJSON && e.Code != apierr.ValidationFailed) {
				t.Fatalf("DecodeJSON(%q) = %v, want 2000 or 2001", body, err)
			}
			return
		}
		var lenient quoteBody
		if err := json.Unmarshal(body, &lenient); err != nil {
			t.Fatalf("strict accepted %q, lenient refuses: %v", body, err)
		}
		a, _ := json.Marshal(strict)
		b, _ := json.Marshal(lenient)
		if string(a) != string(b) {
			t.Fatalf("%q read two ways: %s vs %s", body, a, b)
		}
	})
}

// FuzzCursor: list cursors come back from clients. decode never panics, refuses with
// 2001, and a cursor it accepts is one encode makes from the position it returns.
func FuzzCursor(f *testing.F) {
	c := orderCursor
	f.Add(c.encode(orderstore.Position{CreatedAt: time.UnixMicro(1_700_000_000_000_000).UTC(), ID: "ord_0123456789abcdef01234567"}))
	f.Add("")
	f.Add("bzE6LTE6b3JkX3g")
	f.Add("!!!")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := c.decode(s)
		if err != nil {
			var e *apierr.Error
			if !errors.As(err, &e) || e.Code != apierr.ValidationFailed {
				t.Fatalf("decode(%q) = %v", s, err)
			}
			return
		}
		again, err := c.decode(c.encode(p))
		if err != nil || !again.CreatedAt.Equal(p.CreatedAt) || again.ID != p.ID {
			t.Fatalf("decode(%q) = %+v; re-encoded it decodes to %+v, %v", s, p, again, err)
		}
	})
}
