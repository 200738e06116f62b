package events

import "embed"

// SchemaFiles holds the JSON Schema (draft 2020-12) files that describe the payloads on
// Kafka for data teams: envelope.schema.json (customer events) and chainfact.schema.json
// (chain facts). They ship inside the binaries so a stage can serve or check them.
//
//go:embed *.schema.json
var SchemaFiles embed.FS
