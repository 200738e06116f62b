package events

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzRecordPayloads: Kafka record values as consumers decode them (event envelopes,
// chain facts, market data prices). Decoding never panics, and a value that decodes
// re-encodes to one that decodes to the same value.
func FuzzRecordPayloads(f *testing.F) {
	f.Add([]byte(`{"event_id":"evt_1","event":"order.confirmed","account_id":"acc_1","created_at":"2026-01-02T03:04:05.678Z","data":{"id":"ord_1"}}`))
	f.Add([]byte(`{"kind":"transfer","tx_hash":"ab","block_number":5,"amount":"12.5"}`))
	f.Add([]byte(`{"created_at":"not a time"}`))
	f.Add([]byte(`6000.5`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip[Envelope](t, b)
		roundTrip[ChainFact](t, b)
		roundTrip[Centisun](t, b)
		if c, err := ParseCentisun(string(b)); err == nil {
			if back, err := ParseCentisun(c.String()); err != nil || back != c {
				t.Fatalf("ParseCentisun(%q) = %v; its String %q reads back %v, %v", b, c, c.String(), back, err)
			}
		}
	})
}

func roundTrip[T any](t *testing.T, b []byte) {
	t.Helper()
	var v T
	if json.Unmarshal(b, &v) != nil {
		return
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%T decoded from %q does not encode: %v", v, b, err)
	}
	var again T
	if err := json.Unmarshal(enc, &again); err != nil {
		t.Fatalf("%T: %q re-encoded as %q, which does not decode: %v", v, b, enc, err)
	}
	if !reflect.DeepEqual(normal(t, enc), normal(t, mustMarshal(t, again))) {
		t.Fatalf("%T: round trip of %q changed it: %s", v, b, enc)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func normal(t *testing.T, b []byte) any {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
