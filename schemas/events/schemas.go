package events

import "embed"

// SchemaFiles holds the JSON Schema (draft 2020-12) files that describe the payloads on
// Kafka for data teams: envelope.schema.json (customer events; it dispatches on `event` to
// the data schema <type without dots and underscores>.schema.json), chainfact.schema.json
// (chain facts), marketdata.schema.json (pricing snapshots) and common.schema.json (shared
// definitions). Their $id values are relative to https://rental.example/schemas/events/.
// They ship inside the binaries so a stage can serve or check them; package eventschema
// compiles and applies them. docs/topics.md maps topics to them.
//
//go:embed *.schema.json
var SchemaFiles embed.FS
