package edge

import (
	"context"
	"errors"
	"testing"
	"time"

	"rental/infra/accounts"
	"rental/infra/quotes"
	"rental/infra/tronsim"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/scopes"
)

func (pe *pricingEnv) quoteCount(t *testing.T) int {
	t.Helper()
	var n int
	if err := pe.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM quotes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestQuoteCreateAndGet(t *testing.T) {
	pe := newPricingEnv(t)
	k := pe.key(t, scopes.QuotesWrite, scopes.QuotesRead)
	fresh := randomAddress(t)

	body := `{"resource":"energy","tier":"1h","amount":200000,"receiver":"` + fresh.String() + `"}`
	r := pe.signed(t, k, "POST", "/v1/quotes", body)
	checkFields(t, r, 201, map[string]any{
		"resource": "energy", "amount": 200_000.0, "tier": "1h", "receiver": fresh.String(),
		"price_sun_per_unit": 61.0, "unit_price_sun": 60.01,
		"energy_amount_sun": 12_001_000.0, "activate_amount_sun": float64(testActivationSun),
		"total_amount_sun": 12_001_000.0 + testActivationSun,
		"created_at":       "2025-03-01T12:00:01.000Z", "expires_at": "2025-03-01T12:02:01.000Z",
	})
	id, _ := r.json["id"].(string)
	if !quotes.ValidID(id) {
		t.Fatalf("quote id %q", id)
	}
	fills := r.json["fills"].([]any)
	if len(fills) != 2 || fills[0].(map[string]any)["class"] != "instant" || fills[1].(map[string]any)["class"] != "market" {
		t.Fatalf("fills %v", fills)
	}
	created, _ := time.Parse(time.RFC3339, r.json["created_at"].(string))
	expires, _ := time.Parse(time.RFC3339, r.json["expires_at"].(string))
	if expires.Sub(created) != 120*time.Second {
		t.Fatalf("lifetime %v", expires.Sub(created))
	}

	// GET answers the same record.
	g := pe.signed(t, k, "GET", "/v1/quotes/"+id, "")
	if g.status != 200 || string(g.body) != string(r.body) {
		t.Fatalf("GET: %d %s\nPOST: %s", g.status, g.body, r.body)
	}
	// Still readable after expiry (GET shows the record; orders refuse it with 3005).
	pe.clock.add(3 * time.Minute)
	pe.snaps.set(buildSnapshot(t, testT0.Add(3*time.Minute)))
	if g := pe.signed(t, k, "GET", "/v1/quotes/"+id, ""); g.status != 200 {
		t.Fatalf("GET after expiry: %d %s", g.status, g.body)
	}
	_, err := pe.quotes.GetValid(context.Background(), pe.acct.ID, id, pe.clock.Now())
	if !errors.Is(err, quotes.ErrExpired) || apierr.As(err).Code != apierr.QuoteExpired {
		t.Fatalf("GetValid after expiry: %v", err)
	}

	// Another account's key: 404, exactly like an unknown id.
	other := pe.newAccount(t)
	ko := pe.keyFor(t, other.ID, accounts.NewKey{Scopes: []string{scopes.QuotesRead}})
	for _, path := range []string{"/v1/quotes/" + id, "/v1/quotes/q_000000000000000000000000", "/v1/quotes/nonsense"} {
		wantError(t, pe.signed(t, ko, "GET", path, ""), 404, 3022, "object_not_found", "quoteId")
	}

	// Credentials and scopes.
	wantError(t, pe.ts.do(t, "POST", "/v1/quotes", "application/json", body), 401, 1001, "missing_credentials", nil)
	wantError(t, pe.ts.do(t, "GET", "/v1/quotes/"+id, "", ""), 401, 1001, "missing_credentials", nil)
	e := wantError(t, pe.signed(t, ko, "POST", "/v1/quotes", body), 403, 1005, "insufficient_scope", nil)
	if e["details"].(map[string]any)["required_scope"] != "quotes.write" {
		t.Errorf("scope details %v", e)
	}
	kw := pe.key(t, scopes.QuotesWrite)
	wantError(t, pe.signed(t, kw, "GET", "/v1/quotes/"+id, ""), 403, 1005, "insufficient_scope", nil)
}

func TestQuoteKinds(t *testing.T) {
	pe := newPricingEnv(t)
	k := pe.key(t, scopes.QuotesWrite, scopes.QuotesRead)

	// Uniform price, activated receiver: no fills, no fee.
	r := pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"energy","tier":"5m","amount":50000,"receiver":"`+pe.activated.String()+`"}`)
	checkFields(t, r, 201, map[string]any{"tier": "5m", "unit_price_sun": 40.0, "price_sun_per_unit": 40.0,
		"fills": []any{}, "energy_amount_sun": 2_000_000.0, "activate_amount_sun": 0.0, "total_amount_sun": 2_000_000.0})

	// Activation: amount and tier ignored; one unit at the activation price.
	r = pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"activation","tier":"1d","amount":5}`)
	checkFields(t, r, 201, map[string]any{"resource": "activation", "amount": 1.0, "tier": nil, "receiver": nil,
		"unit_price_sun": float64(testActivationSun), "price_sun_per_unit": float64(testActivationSun), "fills": []any{},
		"energy_amount_sun": 0.0, "activate_amount_sun": float64(testActivationSun), "total_amount_sun": float64(testActivationSun)})
	r = pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"activation"}`)
	checkFields(t, r, 201, map[string]any{"total_amount_sun": float64(testActivationSun)})
	g := pe.signed(t, k, "GET", "/v1/quotes/"+r.json["id"].(string), "")
	if g.status != 200 || string(g.body) != string(r.body) {
		t.Fatalf("GET activation quote: %s vs %s", g.body, r.body)
	}

	// Bandwidth.
	r = pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"bandwidth","tier":"1h","amount":1000,"receiver":null}`)
	checkFields(t, r, 201, map[string]any{"resource": "bandwidth", "unit_price_sun": 800.0, "total_amount_sun": 800_000.0, "receiver": nil})
}

func TestQuoteValidationStoresNothing(t *testing.T) {
	pe := newPricingEnv(t)
	k := pe.key(t, scopes.QuotesWrite)
	cases := []struct {
		name, body string
		status     int
		code       float64
		field      any
		details    map[string]any
	}{
		{"not json", `{"resource":`, 400, 2000, nil, nil},
		{"empty", ``, 400, 2000, nil, nil},
		{"missing resource", `{"tier":"1h","amount":50000}`, 400, 2001, "resource", map[string]any{"constraint": "required"}},
		{"bad resource", `{"resource":"gas","tier":"1h","amount":50000}`, 400, 2001, "resource", map[string]any{"constraint": "enum"}},
		{"resource type", `{"resource":1,"tier":"1h","amount":50000}`, 400, 2001, "resource", map[string]any{"constraint": "type"}},
		{"missing tier", `{"resource":"energy","amount":50000}`, 400, 2001, "tier", map[string]any{"constraint": "required"}},
		{"bad tier", `{"resource":"energy","tier":"2h","amount":50000}`, 400, 2001, "tier", map[string]any{"constraint": "enum"}},
		{"missing amount", `{"resource":"energy","tier":"1h"}`, 400, 2001, "amount", map[string]any{"constraint": "required"}},
		{"amount string", `{"resource":"energy","tier":"1h","amount":"50000"}`, 400, 2001, "amount", map[string]any{"constraint": "type", "expected": "integer"}},
		{"amount fraction", `{"resource":"energy","tier":"1h","amount":50000.5}`, 400, 2001, "amount", map[string]any{"constraint": "type"}},
		{"amount huge", `{"resource":"energy","tier":"1h","amount":1e30}`, 400, 2001, "amount", map[string]any{"constraint": "type"}},
		{"unknown field", `{"resource":"energy","tier":"1h","amount":50000,"price":1}`, 400, 2001, "price", map[string]any{"constraint": "unknown_field"}},
		{"receiver", `{"resource":"energy","tier":"1h","amount":50000,"receiver":"TXYZ"}`, 400, 2007, "receiver", nil},
		{"below min", `{"resource":"energy","tier":"1h","amount":1}`, 400, 2008, "amount", map[string]any{"min_amount": 10_000.0, "max_amount": 10_000_000.0}},
		{"off tier", `{"resource":"energy","tier":"1d","amount":50000}`, 422, 2003, "tier", map[string]any{"available_tiers": []any{"5m", "1h"}}},
		{"retired tier", `{"resource":"energy","tier":"3d","amount":50000}`, 422, 2003, "tier", nil},
		{"paused", `{"resource":"bandwidth","tier":"5m","amount":5000}`, 503, 5006, "tier", nil},
		{"no supply", `{"resource":"energy","tier":"1h","amount":9000000}`, 503, 5001, nil, nil},
	}
	for _, c := range cases {
		r := pe.signed(t, k, "POST", "/v1/quotes", c.body)
		e := envelopeOf(t, r)
		if r.status != c.status || e["code"] != c.code || e["field"] != c.field {
			t.Errorf("%s: got %d %v field %v: %s", c.name, r.status, e["code"], e["field"], r.body)
			continue
		}
		checkDetails(t, c.name, e, c.details)
	}
	// Wrong Content-Type.
	r := pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"activation"}`, "Content-Type", "text/plain")
	wantError(t, r, 400, 2000, "malformed_json", nil)

	// The node fails while a receiver must be checked: a quote is binding, so 5003.
	if _, err := pe.sim.InjectFault(tronsim.FaultNodeDown, 1, 0); err != nil {
		t.Fatal(err)
	}
	r = pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"energy","tier":"1h","amount":50000,"receiver":"`+randomAddress(t).String()+`"}`)
	wantError(t, r, 503, 5003, "chain_unavailable", "receiver")

	// No snapshot.
	pe.snaps.p.Store(nil)
	wantError(t, pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"activation"}`), 503, 5003, "chain_unavailable", nil)

	if n := pe.quoteCount(t); n != 0 {
		t.Fatalf("%d quotes stored by refused requests", n)
	}
}

func TestQuoteIdempotencyKey(t *testing.T) {
	pe := newPricingEnv(t)
	k := pe.key(t, scopes.QuotesWrite, scopes.QuotesRead)
	body := `{"resource":"energy","tier":"1h","amount":700000}`
	first := pe.signed(t, k, "POST", "/v1/quotes", body, "Idempotency-Key", "quote-key-0001")
	if first.status != 201 {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	// The price moves; a repeat still returns the original quote, with 200.
	pe.clock.add(10 * time.Second)
	pe.snaps.set(buildSnapshot(t, testT0.Add(7*time.Hour))) // evening: factor 1.20
	again := pe.signed(t, k, "POST", "/v1/quotes", body, "Idempotency-Key", "quote-key-0001")
	if again.status != 200 || string(again.body) != string(first.body) || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %s\nfirst: %s", again.status, again.body, first.body)
	}
	// The same key with another body: 3010 naming the original quote.
	e := wantError(t, pe.signed(t, k, "POST", "/v1/quotes", `{"resource":"energy","tier":"1h","amount":700001}`, "Idempotency-Key", "quote-key-0001"),
		409, 3010, "idempotency_conflict", nil)
	if e["details"].(map[string]any)["original_id"] != first.json["id"] {
		t.Errorf("original_id %v, want %v", e["details"], first.json["id"])
	}
	// A malformed key changes nothing.
	wantError(t, pe.signed(t, k, "POST", "/v1/quotes", body, "Idempotency-Key", "short"), 400, 2001, "validation_failed", "Idempotency-Key")
	// A new key is a new quote at the new price.
	fresh := pe.signed(t, k, "POST", "/v1/quotes", body, "Idempotency-Key", "quote-key-0002")
	if fresh.status != 201 || fresh.json["id"] == first.json["id"] || fresh.json["unit_price_sun"] == first.json["unit_price_sun"] {
		t.Fatalf("new key: %d %s", fresh.status, fresh.body)
	}
	if n := pe.quoteCount(t); n != 2 {
		t.Fatalf("%d quotes stored, want 2", n)
	}
	if exp := fresh.json["expires_at"]; exp != events.FormatTime(testT0.Add(11*time.Second+120*time.Second)) {
		t.Errorf("expires_at %v", exp)
	}
}
