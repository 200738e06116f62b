// Package openapi is the machine-readable contract of the HTTP API: the OpenAPI 3.1
// document openapi.yaml, which the edge serves at GET /openapi.yaml and /openapi.json.
//
// The document is edited by hand except for the parts between GENERATED markers, which the
// tests of this package write with -update: the error responses and bodies
// (`go test ./schemas/openapi -run TestErrorResponses -update`: per operation and status
// the Error<code> bodies of its x-error-codes, from schemas/apierr) and the webhooks with
// their event schemas (`go test ./schemas/openapi -run TestWebhooks -update`, from
// schemas/events). The tests check that the document is valid OpenAPI 3.1, that the
// generated parts are current, that the signing rules it states match schemas/vectors, that
// every example passes its schema, and that Redocly and Spectral (lint/, with the one list
// of exceptions lint/exceptions.yaml) report nothing else; edge's tests check that every
// route of its endpoint table is an operation of the document and the other way round, and
// validate every response they receive against it. infra/client/typescript is generated
// from it (npm run generate there).
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
