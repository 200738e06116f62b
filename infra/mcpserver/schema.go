package mcpserver

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"rental/schemas/openapi"
	"rental/schemas/pricing"
)

// componentPrefix is how the OpenAPI document refers to its schemas; an output schema carries
// the ones it needs under $defs instead.
const componentPrefix = "#/components/schemas/"

// apiSchemas holds the OpenAPI document's component schemas (OpenAPI 3.1 schemas are JSON
// Schema 2020-12, so they serve as MCP output schemas as they are).
type apiSchemas map[string]any

func loadAPISchemas() (apiSchemas, error) {
	raw, err := openapi.JSON()
	if err != nil {
		return nil, err
	}
	var doc struct {
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("mcpserver: the OpenAPI document: %w", err)
	}
	if len(doc.Components.Schemas) == 0 {
		return nil, fmt.Errorf("mcpserver: the OpenAPI document has no component schemas")
	}
	return doc.Components.Schemas, nil
}

// output is the JSON Schema of a tool's structured result: the document's component name,
// with every schema it reaches copied under $defs and its references rewritten to them, so
// the tool's output is checked against the same schema the API's answers are.
func (s apiSchemas) output(name string) (map[string]any, error) {
	defs := map[string]any{}
	var visit func(string) error
	visit = func(n string) error {
		if _, done := defs[n]; done {
			return nil
		}
		sch, ok := s[n]
		if !ok {
			return fmt.Errorf("mcpserver: the OpenAPI document has no schema %q", n)
		}
		defs[n] = nil // mark before descending: schemas may refer to themselves
		var refs []string
		defs[n] = rewrite(sch, &refs)
		for _, r := range refs {
			if err := visit(r); err != nil {
				return err
			}
		}
		return nil
	}
	if err := visit(name); err != nil {
		return nil, err
	}
	return map[string]any{
		"type":  "object", // MCP: structured content is a JSON object
		"$ref":  "#/$defs/" + name,
		"$defs": defs,
	}, nil
}

// rewrite copies v with every "$ref" to a component turned into a $defs reference, and
// appends the names it referred to.
func rewrite(v any, refs *[]string) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "$ref" {
				if r, ok := t[k].(string); ok && strings.HasPrefix(r, componentPrefix) {
					name := strings.TrimPrefix(r, componentPrefix)
					*refs = append(*refs, name)
					out[k] = "#/$defs/" + name
					continue
				}
			}
			out[k] = rewrite(t[k], refs)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = rewrite(e, refs)
		}
		return out
	}
	return v
}

// Input constraints by property name, the same wherever the name appears: the enumerations
// and bounds of rental-api-v1 (addresses are Base58Check, 34 characters from T;
// client_order_id is 1 to 128 printable ASCII characters without spaces, docs/orders.md).
var (
	addressPattern       = `^T[1-9A-HJ-NP-Za-km-z]{33}$`
	clientOrderIDPattern = `^[!-~]{1,128}$`
	one                  = 1.0
)

// inputSchema is the JSON Schema of a tool's input type T (the SDK's inference, property
// descriptions from the jsonschema tags) with the API's enumerations and bounds added.
func inputSchema[T any]() (*jsonschema.Schema, error) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, err
	}
	var resources, tiers []any
	for _, r := range []pricing.Resource{pricing.Energy, pricing.Bandwidth, pricing.Activation} {
		resources = append(resources, string(r))
	}
	for _, t := range pricing.Tiers {
		tiers = append(tiers, string(t))
	}
	for name, p := range s.Properties {
		switch name {
		case "resource":
			p.Enum = resources
		case "tier":
			p.Enum = tiers
		case "amount", "max_price_sun", "limit":
			if p.Type == "integer" {
				p.Minimum = &one
			}
		case "receiver", "address", "from_address", "to_address", "contract_address":
			p.Pattern = addressPattern
		case "client_order_id":
			p.Pattern = clientOrderIDPattern
		case "id", "cursor", "quote_id":
			p.MinLength = ptr(1)
		}
	}
	return s, nil
}
