package chainwatch

import (
	"encoding/json"
	"math/big"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"rental/infra/testenv"
	"rental/schemas/events"
)

// factSchema is the subset of chainfact.schema.json this test understands: flat
// properties with type, pattern, enum, minimum, and per-kind required lists.
type factSchema struct {
	Required   []string                  `json:"required"`
	Properties map[string]schemaProperty `json:"properties"`
	AllOf      []struct {
		If struct {
			Properties struct {
				Kind struct {
					Const string `json:"const"`
				} `json:"kind"`
			} `json:"properties"`
		} `json:"if"`
		Then struct {
			Required []string `json:"required"`
		} `json:"then"`
	} `json:"allOf"`
	Defs map[string]schemaProperty `json:"$defs"`
}

type schemaProperty struct {
	Ref     string   `json:"$ref"`
	Type    string   `json:"type"`
	Pattern string   `json:"pattern"`
	Enum    []string `json:"enum"`
	Minimum *int64   `json:"minimum"`
}

func loadFactSchema(t testing.TB) factSchema {
	t.Helper()
	raw, err := os.ReadFile("../schemas/events/chainfact.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s factSchema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("chainfact.schema.json: %v", err)
	}
	return s
}

// checkFact validates one marshalled fact against the schema.
func checkFact(t testing.TB, s factSchema, f events.ChainFact) {
	t.Helper()
	raw, _ := json.Marshal(f)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	required := slices.Clone(s.Required)
	for _, c := range s.AllOf {
		if c.If.Properties.Kind.Const == string(f.Kind) {
			required = append(required, c.Then.Required...)
		}
	}
	for _, r := range required {
		if _, ok := m[r]; !ok {
			t.Errorf("%s fact lacks required %q: %s", f.Kind, r, raw)
		}
	}
	for k, v := range m {
		p, ok := s.Properties[k]
		if !ok {
			t.Errorf("field %q is not in the schema", k)
			continue
		}
		if p.Ref != "" {
			p = s.Defs[strings.TrimPrefix(p.Ref, "#/$defs/")]
		}
		switch p.Type {
		case "string":
			str, ok := v.(string)
			if !ok {
				t.Errorf("%q: want a string, got %v", k, v)
			} else if p.Pattern != "" && !regexp.MustCompile(p.Pattern).MatchString(str) {
				t.Errorf("%q = %q does not match %s", k, str, p.Pattern)
			}
		case "integer":
			n, ok := v.(float64)
			if !ok || n != float64(int64(n)) {
				t.Errorf("%q: want an integer, got %v", k, v)
			} else if p.Minimum != nil && int64(n) < *p.Minimum {
				t.Errorf("%q = %v below minimum %d", k, v, *p.Minimum)
			}
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, v.(string)) {
			t.Errorf("%q = %v not in %v", k, v, p.Enum)
		}
	}
}

// The Go type and the JSON Schema for data teams describe the same fields.
func TestFactSchemaMatchesGoType(t *testing.T) {
	s := loadFactSchema(t)
	var goFields []string
	ty := reflect.TypeFor[events.ChainFact]()
	for i := range ty.NumField() {
		goFields = append(goFields, strings.Split(ty.Field(i).Tag.Get("json"), ",")[0])
	}
	var schemaFields []string
	for k := range s.Properties {
		schemaFields = append(schemaFields, k)
	}
	slices.Sort(goFields)
	slices.Sort(schemaFields)
	if !slices.Equal(goFields, schemaFields) {
		t.Fatalf("Go fields %v\nschema properties %v", goFields, schemaFields)
	}
	kinds := []string{string(events.FactTRXTransfer), string(events.FactTRC20Transfer), string(events.FactTxResult), string(events.FactRevert)}
	if !slices.Equal(s.Properties["kind"].Enum, kinds) {
		t.Errorf("schema kinds %v, Go kinds %v", s.Properties["kind"].Enum, kinds)
	}
}

// Every kind of fact the follower emits, revert included, validates against the schema.
func TestEmittedFactsValidateAgainstSchema(t *testing.T) {
	s := loadFactSchema(t)
	db := testenv.Postgres(t)
	ob := testOutbox()
	c := newMemChain()
	trxID := c.trx(alice, bob, 5)
	huge, _ := new(big.Int).SetString("340282366920938463463374607431768211456", 10)
	c.trc20(alice, usdt, false, transferLog(usdt, alice, bob, huge))
	if err := Track(t.Context(), db.Pool, trxID); err != nil {
		t.Fatal(err)
	}
	f := newTestFollower(t, db.Pool, c, ob, nil)
	catchUp(t, f)
	c.fork(2)
	catchUp(t, f)
	got := emitted(t, db.Pool)
	seen := map[events.FactKind]bool{}
	for _, fact := range got {
		seen[fact.Kind] = true
		checkFact(t, s, fact)
	}
	if len(seen) != 4 {
		t.Fatalf("kinds emitted %v, want all four", seen)
	}
}
