package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"

	"rental/schemas/events"
)

// The webhooks of the document are written from the event schemas of schemas/events, so
// the payload a receiver gets and the type a generator emits are the same schema:
//   - components.schemas Event<Def> for each definition of common.schema.json,
//     Event<Type>Data for each event type's data schema (<type without dots and
//     underscores>.schema.json) and Event<Type> for its envelope (envelope.schema.json with
//     `event` fixed to the type and `data` the data schema);
//   - one `webhooks` entry per event type of the catalogue, a POST of Event<Type> with the
//     delivery headers (components.parameters Delivery*) under the WebhookSignature scheme,
//     and as its example the test call's delivery of the type (events.SampleData).
//
// `go test ./schemas/openapi -run TestWebhooks -update` rewrites both parts.
const (
	webhooksBegin  = "# BEGIN GENERATED webhooks from schemas/events"
	schemasBegin   = "    # BEGIN GENERATED event schemas from schemas/events"
	webhooksEndTag = "# END GENERATED webhooks"
	schemasEndTag  = "    # END GENERATED event schemas"
)

// camel turns "order.confirmed", "deposit_address.rotated" or "tx_hash_or_null" into
// OrderConfirmed, DepositAddressRotated, TxHashOrNull.
func camel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '.' || r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// schemaFileOf is the data schema file of an event type.
func schemaFileOf(typ string) string {
	return strings.NewReplacer(".", "", "_", "").Replace(typ) + ".schema.json"
}

func readSchemaNode(t *testing.T, file string) *yaml.Node {
	t.Helper()
	b, err := events.SchemaFiles.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return doc.Content[0]
}

// adapt makes a JSON Schema node a component of the document: the file-level keywords go,
// references to common.schema.json definitions point at their components, mappings are
// written in block style and lists of scalars in flow style.
func adapt(t *testing.T, n *yaml.Node, top bool) {
	t.Helper()
	switch n.Kind {
	case yaml.MappingNode:
		n.Style = 0
		var kept []*yaml.Node
		for i := 0; i < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			k.Style = 0
			if top && (k.Value == "$schema" || k.Value == "$id" || k.Value == "title" || k.Value == "$defs") {
				continue
			}
			if k.Value == "$ref" {
				v.Value = refTo(t, v.Value)
				v.Style = yaml.SingleQuotedStyle
			} else {
				adapt(t, v, false)
			}
			kept = append(kept, k, v)
		}
		n.Content = kept
	case yaml.SequenceNode:
		n.Style = yaml.FlowStyle
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				n.Style = 0
			}
			adapt(t, c, false)
		}
	case yaml.ScalarNode:
		n.Style = 0
	}
}

func refTo(t *testing.T, ref string) string {
	t.Helper()
	for _, prefix := range []string{"common.schema.json#/$defs/", "#/$defs/"} {
		if def, ok := strings.CutPrefix(ref, prefix); ok {
			return "#/components/schemas/Event" + camel(def)
		}
	}
	t.Fatalf("event schema reference %q: only common.schema.json definitions are expected", ref)
	return ""
}

// lookup returns the value of key in mapping n.
func lookup(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

func encodeIndented(t *testing.T, n *yaml.Node, indent string) string {
	t.Helper()
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		out.WriteString(indent + line + "\n")
	}
	return out.String()
}

// eventSchemas is the generated part of components.schemas.
func eventSchemas(t *testing.T) string {
	t.Helper()
	all := &yaml.Node{Kind: yaml.MappingNode}
	common := readSchemaNode(t, "common.schema.json")
	defs := lookup(common, "$defs")
	for i := 0; i < len(defs.Content); i += 2 {
		adapt(t, defs.Content[i+1], false)
		all.Content = append(all.Content, str("Event"+camel(defs.Content[i].Value)), defs.Content[i+1])
	}
	for _, typ := range events.Catalogue() {
		data := readSchemaNode(t, schemaFileOf(typ.Name))
		adapt(t, data, true)
		all.Content = append(all.Content, str("Event"+camel(typ.Name)+"Data"), data)

		// The envelope without its dispatch on `event` (allOf): this copy is of one type.
		env := readSchemaNode(t, "envelope.schema.json")
		var kept []*yaml.Node
		for i := 0; i < len(env.Content); i += 2 {
			if env.Content[i].Value != "allOf" {
				kept = append(kept, env.Content[i], env.Content[i+1])
			}
		}
		env.Content = kept
		adapt(t, env, true)
		lookup(env, "description").Value = fmt.Sprintf("The %s event as delivered (webhook body and the events.* topics): the envelope of schemas/events/envelope.schema.json with its data.", typ.Name)
		props := lookup(env, "properties")
		ev := lookup(props, "event")
		ev.Content = []*yaml.Node{str("const"), str(typ.Name)}
		d := lookup(props, "data")
		d.Content = []*yaml.Node{str("$ref"), {Kind: yaml.ScalarNode, Style: yaml.SingleQuotedStyle, Value: "#/components/schemas/Event" + camel(typ.Name) + "Data"}}
		all.Content = append(all.Content, str("Event"+camel(typ.Name)), env)
	}
	return schemasBegin + " by `go test ./schemas/openapi -run TestWebhooks -update`; do not edit by hand.\n" +
		encodeIndented(t, all, "    ") + schemasEndTag + "\n"
}

// webhookEntries is the generated `webhooks` section.
func webhookEntries(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(webhooksBegin + " by `go test ./schemas/openapi -run TestWebhooks -update`; do not edit by hand.\n")
	b.WriteString("webhooks:\n")
	for _, typ := range events.Catalogue() {
		data := readSchemaNode(t, schemaFileOf(typ.Name))
		sent := lookup(data, "description").Value
		name := camel(typ.Name)
		fmt.Fprintf(&b, "  %s:\n", typ.Name)
		b.WriteString("    post:\n")
		fmt.Fprintf(&b, "      operationId: on%s\n", name)
		fmt.Fprintf(&b, "      summary: The %s event\n", typ.Name)
		b.WriteString("      description: |\n")
		for _, line := range wrap(sent, 90) {
			fmt.Fprintf(&b, "        %s\n", line)
		}
		b.WriteString("\n")
		for _, line := range wrap("POSTed to the account's endpoint subscribed to "+typ.Name+
			" (primary, else backup), signed as the WebhookSignature scheme states; retried on the "+
			"schedule of the Webhooks tag until a 2xx answer arrives within 10 s. Deduplicate on "+
			"event_id (X-Event-Id); a delivery with test = true never triggers a money action.", 90) {
			fmt.Fprintf(&b, "        %s\n", line)
		}
		b.WriteString("      tags: [Webhooks]\n")
		b.WriteString("      security:\n        - {WebhookSignature: []}\n")
		b.WriteString("      parameters:\n")
		for _, p := range deliveryHeaders {
			fmt.Fprintf(&b, "        - $ref: '#/components/parameters/%s'\n", p)
		}
		b.WriteString("      requestBody:\n        required: true\n        content:\n          application/json:\n")
		fmt.Fprintf(&b, "            schema: {$ref: '#/components/schemas/Event%s'}\n", name)
		example, err := json.Marshal(map[string]any{
			"event": typ.Name, "event_id": "evt_0123456789abcdef01234567", "event_version": 1,
			"created_at": "2026-01-01T00:00:00.000Z", "account_id": "acc_0123456789abcdef01234567",
			"network": "mainnet", "test": true, "data": events.SampleData(typ.Name),
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "            example: %s\n", example)
		b.WriteString("      responses:\n")
		b.WriteString("        '2XX':\n          description: Delivered. Any 2xx within 10 s acknowledges the event; its body is ignored.\n")
		b.WriteString("        default:\n          description: Any other answer (3xx included), no answer or one slower than 10 s fails the attempt; it is retried on the schedule.\n")
	}
	b.WriteString(webhooksEndTag + "\n")
	return b.String()
}

// deliveryHeaders are the components.parameters of every delivery's headers.
var deliveryHeaders = []string{"DeliveryEventId", "DeliveryEventType", "DeliveryEventVersion", "DeliveryId", "DeliveryAttempt", "DeliveryTimestamp", "DeliverySignature", "DeliveryUserAgent"}

// wrap breaks text into lines of at most width characters at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// replaceSection replaces the text from the line starting with begin to the line starting
// with end (both included) by part.
func replaceSection(t *testing.T, doc, begin, end, part string) (string, bool) {
	t.Helper()
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("openapi.yaml has no %q ... %q section", begin, end)
	}
	j += strings.IndexByte(doc[j:], '\n') + 1
	return doc[:i] + part + doc[j:], doc[i:j] == part
}

// The webhooks and event schemas of the document are exactly those written from
// schemas/events. Run with -update after changing an event schema or the catalogue.
func TestWebhooksMatchTheEventSchemas(t *testing.T) {
	raw, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, same1 := replaceSection(t, string(raw), webhooksBegin, webhooksEndTag, webhookEntries(t))
	doc, same2 := replaceSection(t, doc, schemasBegin, schemasEndTag, eventSchemas(t))
	if same1 && same2 {
		return
	}
	if *update {
		if err := os.WriteFile("openapi.yaml", []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("openapi.yaml: webhooks and event schemas rewritten")
		return
	}
	t.Errorf("the webhooks of openapi.yaml differ from schemas/events; run go test ./schemas/openapi -run TestWebhooks -update")
}
