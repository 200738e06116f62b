package eventschema_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"rental/schemas/events"
	"rental/schemas/eventschema"
)

// The CI check: the schemas in schemas/events make no breaking change against the last
// released copy in schemas/events/released unless the version rose.
func TestSchemasAreCompatibleWithTheLastRelease(t *testing.T) {
	changes, err := eventschema.Check(os.DirFS("../events/released"), events.SchemaFiles)
	for _, c := range changes {
		t.Log(c)
	}
	if err != nil {
		t.Fatal(err)
	}
}

type docs map[string]map[string]any

func current(t *testing.T) docs {
	t.Helper()
	names, err := fs.Glob(events.SchemaFiles, "*.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	out := docs{}
	for _, n := range names {
		raw, _ := events.SchemaFiles.ReadFile(n)
		var d map[string]any
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		out[n] = d
	}
	return out
}

func (d docs) fs(t *testing.T, dir string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	for n, doc := range d {
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		m[strings.TrimPrefix(dir+"/"+n, "/")] = &fstest.MapFile{Data: b}
	}
	return m
}

func props(d docs, file string) map[string]any { return d[file]["properties"].(map[string]any) }

func setEventVersion(d docs, v int) {
	props(d, "envelope.schema.json")["event_version"].(map[string]any)["const"] = v
}

// The checker itself: planted breaking changes fail, unless event_version rises; additive
// changes pass.
func TestCompatCheckerCatchesBreakingChanges(t *testing.T) {
	breaking := map[string]func(d docs){
		"removed field": func(d docs) { delete(props(d, "orderconfirmed.schema.json"), "partial") },
		"changed type": func(d docs) {
			props(d, "balancelow.schema.json")["balance_sun"] = map[string]any{"type": "string"}
		},
		"new required field": func(d docs) {
			props(d, "balancelow.schema.json")["currency"] = map[string]any{"type": "string"}
			d["balancelow.schema.json"]["required"] = append(d["balancelow.schema.json"]["required"].([]any), "currency")
		},
		"field no longer required": func(d docs) { d["subscriptionpaused.schema.json"]["required"] = []any{"subscription_id"} },
		"removed enum value": func(d docs) {
			props(d, "orderrefunded.schema.json")["reason"] = map[string]any{"enum": []any{"dispute"}}
		},
		"removed event type": func(d docs) {
			all := d["envelope.schema.json"]["allOf"].([]any)
			d["envelope.schema.json"]["allOf"] = all[1:]
		},
		"removed file": func(d docs) { delete(d, "orderfailed.schema.json") },
		"changed nested type": func(d docs) {
			props(d, "orderconfirmed.schema.json")["activation"].(map[string]any)["properties"].(map[string]any)["performed"] = map[string]any{"type": "integer"}
		},
		"removed definition": func(d docs) { delete(d["common.schema.json"]["$defs"].(map[string]any), "sun") },
		"tightened bound": func(d docs) {
			props(d, "batchcompleted.schema.json")["summary"].(map[string]any)["properties"].(map[string]any)["total"].(map[string]any)["maximum"] = 50.0
		},
		"changed pattern": func(d docs) {
			props(d, "depositaddressrotated.schema.json")["address"].(map[string]any)["pattern"] = "^T.*$"
		},
		"market data shape": func(d docs) { delete(props(d, "marketdata.schema.json"), "books") },
	}
	additive := map[string]func(d docs){
		"new optional field": func(d docs) {
			props(d, "orderconfirmed.schema.json")["filled_by"] = map[string]any{"type": []any{"string", "null"}}
		},
		"new enum value": func(d docs) {
			r := props(d, "orderrefunded.schema.json")["reason"].(map[string]any)
			r["enum"] = append(r["enum"].([]any), "goodwill")
		},
		"new event type": func(d docs) {
			env := d["envelope.schema.json"]
			env["allOf"] = append(env["allOf"].([]any), map[string]any{
				"if":   map[string]any{"properties": map[string]any{"event": map[string]any{"const": "order.extended"}}, "required": []any{"event"}},
				"then": map[string]any{"properties": map[string]any{"data": map[string]any{"$ref": "orderextended.schema.json"}}},
			})
			d["orderextended.schema.json"] = map[string]any{"type": "object"}
		},
	}
	released := current(t).fs(t, "v1")
	for name, mutate := range breaking {
		d := current(t)
		mutate(d)
		changes, err := eventschema.Check(released, d.fs(t, ""))
		if err == nil {
			t.Errorf("%s: passed; changes %v", name, changes)
			continue
		}
		// The same change with a higher event_version (market data: its own version) passes.
		if name == "market data shape" {
			props(d, "marketdata.schema.json")["version"] = map[string]any{"const": 2}
		} else {
			setEventVersion(d, 2)
		}
		if _, err := eventschema.Check(released, d.fs(t, "")); err != nil {
			t.Errorf("%s with the version raised: %v", name, err)
		}
	}
	for name, mutate := range additive {
		d := current(t)
		mutate(d)
		changes, err := eventschema.Check(released, d.fs(t, ""))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if len(changes) == 0 { // additive changes are reported, just not refused
			t.Errorf("%s: no change reported", name)
		}
	}
	// A version never goes down against the latest release.
	d := current(t)
	setEventVersion(d, 2)
	two := d.fs(t, "v2")
	for k, v := range released {
		two[k] = v
	}
	if _, err := eventschema.Check(two, current(t).fs(t, "")); err == nil {
		t.Error("event_version 1 passed against released v2")
	}
}
