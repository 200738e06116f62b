// Package eventschema checks bytes against the JSON Schema files of schemas/events: an
// envelope against envelope.schema.json (which dispatches on `event` to the payload's
// schema), a record of a public topic against the schema of that topic's values, and a new
// copy of the schemas against the last released one (compat.go). It is pure: the schemas
// are compiled from the files embedded in schemas/events.
package eventschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"rental/schemas/events"
	"rental/schemas/topics"
)

// BaseURL is the URL the schema files' $id values are relative to; a $ref between files
// ("common.schema.json#/$defs/address") resolves against it.
const BaseURL = "https://rental.example/schemas/events/"

// Files of the schemas that are not a customer event's data.
const (
	EnvelopeFile   = "envelope.schema.json"
	ChainFactFile  = "chainfact.schema.json"
	MarketDataFile = "marketdata.schema.json"
	CommonFile     = "common.schema.json"
)

// FileFor names the schema file of an event type's data: the type without its dots and
// underscores (deposit_address.rotated -> depositaddressrotated.schema.json).
func FileFor(eventType string) string {
	return strings.NewReplacer(".", "", "_", "").Replace(eventType) + ".schema.json"
}

// Set is the compiled schemas of one copy of the files.
type Set struct {
	byFile map[string]*jsonschema.Schema
}

var (
	embedded     *Set
	embeddedErr  error
	embeddedOnce sync.Once
)

// Embedded returns the compiled schemas shipped in schemas/events, compiled once.
func Embedded() (*Set, error) {
	embeddedOnce.Do(func() { embedded, embeddedErr = Compile(events.SchemaFiles) })
	return embedded, embeddedErr
}

// Compile compiles every *.schema.json at the root of fsys.
func Compile(fsys fs.FS) (*Set, error) {
	names, err := fs.Glob(fsys, "*.schema.json")
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s is not JSON: %w", name, err)
		}
		if err := c.AddResource(BaseURL+name, doc); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	s := &Set{byFile: map[string]*jsonschema.Schema{}}
	for _, name := range names {
		sch, err := c.Compile(BaseURL + name)
		if err != nil {
			return nil, fmt.Errorf("%s does not compile: %w", name, err)
		}
		s.byFile[name] = sch
	}
	return s, nil
}

// HasEventSchema reports whether eventType's data has a schema in the set.
func (s *Set) HasEventSchema(eventType string) bool {
	_, ok := s.byFile[FileFor(eventType)]
	return ok && strings.Contains(eventType, ".")
}

// File validates raw JSON against the named schema file.
func (s *Set) File(name string, raw []byte) error {
	sch, ok := s.byFile[name]
	if !ok {
		return fmt.Errorf("no schema %s", name)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := sch.Validate(doc); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// Envelope validates an event envelope: the envelope schema, which checks data against the
// schema of its event type, and that the type has a schema at all (an event the service
// emits must be documented; a consumer ignores types it does not know).
func (s *Set) Envelope(raw []byte) (events.Envelope, error) {
	var env events.Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return env, fmt.Errorf("envelope: %w", err)
	}
	if !s.HasEventSchema(env.Event) {
		return env, fmt.Errorf("event type %q has no schema (%s)", env.Event, FileFor(env.Event))
	}
	if err := s.File(EnvelopeFile, raw); err != nil {
		return env, fmt.Errorf("%s %s: %w", env.Event, env.EventID, err)
	}
	return env, nil
}

// Public reports whether records of the topic are for readers outside the service and so
// have a schema. The internal topics (order intents, webhook retry wake-ups) do not.
func Public(topic string) bool {
	switch topic {
	case topics.ChainFacts.Name, topics.MarketData.Name, topics.WebhookDead.Name:
		return true
	}
	for _, t := range []topics.Topic{topics.OrderEvents, topics.AccountEvents, topics.SubscriptionEvents, topics.BatchEvents} {
		if t.Name == topic {
			return true
		}
	}
	return false
}

// Record validates one record of a topic: its value against the schema of the topic's
// values, the event's topic against the catalogue's routing, and the key against the id
// the topic is keyed by. Records of internal topics pass unchecked.
func (s *Set) Record(topic string, key, value []byte) error {
	switch topic {
	case topics.ChainFacts.Name:
		if err := s.File(ChainFactFile, value); err != nil {
			return err
		}
		var f struct {
			TxID string `json:"tx_id"`
		}
		_ = json.Unmarshal(value, &f)
		if string(key) != f.TxID {
			return fmt.Errorf("%s: key %q, want the fact's tx_id %q", topic, key, f.TxID)
		}
		return nil
	case topics.MarketData.Name:
		if err := s.File(MarketDataFile, value); err != nil {
			return err
		}
		if string(key) != events.MarketDataKey {
			return fmt.Errorf("%s: key %q, want %q", topic, key, events.MarketDataKey)
		}
		return nil
	}
	if !Public(topic) {
		return nil
	}
	env, err := s.Envelope(value)
	if err != nil {
		return fmt.Errorf("%s: %w", topic, err)
	}
	if topic == topics.WebhookDead.Name {
		return nil // the envelope as it was sent, keyed by its delivery's ordering key
	}
	want, ok := topics.ForEvent(env.Event)
	if !ok || want.Name != topic {
		return fmt.Errorf("%s: event %s belongs on %s", topic, env.Event, want.Name)
	}
	wantKey := env.AccountID
	if want.Key != "account_id" {
		var d map[string]any
		_ = json.Unmarshal(env.Data, &d)
		if id, ok := d[want.Key].(string); ok && id != "" {
			wantKey = id
		}
	}
	if string(key) != wantKey {
		return fmt.Errorf("%s: %s %s keyed %q, want %q (%s)", topic, env.Event, env.EventID, key, wantKey, want.Key)
	}
	return nil
}
