package chainwatch

import (
	"bytes"
	"encoding/json"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"rental/infra/chainstore"
	"rental/infra/testenv"
	"rental/schemas/events"
)

// factSchema is what TestFactSchemaMatchesGoType compares: the property names and the
// kind enum of chainfact.schema.json.
type factSchema struct {
	Properties map[string]schemaProperty `json:"properties"`
}

type schemaProperty struct {
	Enum []string `json:"enum"`
}

func loadFactSchema(t testing.TB) factSchema {
	t.Helper()
	raw, err := events.SchemaFiles.ReadFile("chainfact.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s factSchema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("chainfact.schema.json: %v", err)
	}
	return s
}

// checkFact validates one marshalled fact against chainfact.schema.json with a full JSON
// Schema validator.
func checkFact(t testing.TB, f events.ChainFact) {
	t.Helper()
	raw, err := events.SchemaFiles.ReadFile("chainfact.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("chainfact.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("chainfact.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(f)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(inst); err != nil {
		t.Errorf("%s fact %s fails the schema: %v", f.Kind, b, err)
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
	db := testenv.Postgres(t)
	ob := testOutbox()
	c := newMemChain()
	trxID := c.trx(alice, bob, 5)
	huge, _ := new(big.Int).SetString("340282366920938463463374607431768211456", 10)
	c.trc20(alice, usdt, false, transferLog(usdt, alice, bob, huge))
	if err := chainstore.Track(t.Context(), db.Pool, trxID); err != nil {
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
		checkFact(t, fact)
	}
	if len(seen) != 4 {
		t.Fatalf("kinds emitted %v, want all four", seen)
	}
}
