// Package openapi is the machine-readable contract of the HTTP API: the OpenAPI 3.1
// document openapi.yaml, which the edge serves at GET /openapi.yaml and /openapi.json.
//
// The document is edited by hand except for the error responses (components.responses,
// between the GENERATED markers), which are written from the catalogue in schemas/apierr by
// `go test ./schemas/openapi -run TestErrorResponses -update`. The tests of this package
// check that the document is valid OpenAPI 3.1 and that the generated part matches the
// catalogue; edge's tests check that every route of its endpoint table is an operation of
// the document and the other way round, and validate every response they receive against it.
package openapi

import (
	_ "embed"
	"encoding/json"
	"sync"

	"go.yaml.in/yaml/v3"
)

// YAML is the document as kept in the repository.
//
//go:embed openapi.yaml
var YAML []byte

// JSON returns the document converted to JSON (computed once).
func JSON() ([]byte, error) { return toJSON() }

var toJSON = sync.OnceValues(func() ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(YAML, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
})
