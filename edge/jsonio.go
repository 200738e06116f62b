package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"

	"rental/schemas/apierr"
)

const contentTypeJSON = "application/json; charset=utf-8"

// WriteJSON answers v as JSON with the given status. A value that does not marshal is a
// programming error; it is returned so the handler's caller answers 9000.
func WriteJSON(rc *fasthttp.RequestCtx, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	rc.Response.Header.SetContentType(contentTypeJSON)
	rc.SetStatusCode(status)
	rc.SetBody(b)
	return nil
}

// NoContent answers 204 with no body (DELETE and the like).
func NoContent(rc *fasthttp.RequestCtx) {
	rc.SetStatusCode(fasthttp.StatusNoContent)
	rc.ResetBody()
}

// Invalid is the validation error endpoints return for a bad parameter: 2001
// validation_failed naming field, with details.constraint (for example "required",
// "min", "enum") so clients can branch without parsing the message.
func Invalid(field, constraint, message string) *apierr.Error {
	return apierr.ValidationFailed.New(message).WithField(field).With("constraint", constraint)
}

// DecodeJSON reads the request body into dst (a pointer, normally to a struct). It is
// strict, because a silently ignored field in a money API is a bug waiting:
//
//   - Content-Type must be application/json (charset, if given, utf-8): else 2000
//     malformed_json, details.constraint "content_type".
//   - The body must be one JSON value with nothing after it: else 2000 malformed_json
//     (details.offset when the parser knows where).
//   - A key repeated in one object gives 2000 malformed_json, constraint "duplicate_key".
//   - An unknown field gives 2001 validation_failed, field = its name, constraint
//     "unknown_field"; keys match field names exactly (case-sensitively); a value of the wrong type gives 2001 with field = the dotted path
//     (e.g. "receivers.0.amount" style as reported by encoding/json, "a.b" for nesting),
//     constraint "type" and details.expected (string, integer, number, boolean, object,
//     array).
//
// Body size is bounded by the server (Options.MaxBodyBytes) before this runs. Required
// fields and ranges are the endpoint's to check, with Invalid.
func DecodeJSON(rc *fasthttp.RequestCtx, dst any) error {
	if err := requireJSONContentType(rc.Request.Header.ContentType()); err != nil {
		return err
	}
	body := rc.Request.Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return apierr.MalformedJSON.New("request body is empty; a JSON object is required")
	}
	if err := strictKeys(body, reflect.TypeOf(dst)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apierr.MalformedJSON.New("unexpected data after the JSON value").With("offset", dec.InputOffset())
	}
	return nil
}

func requireJSONContentType(ct []byte) error {
	bad := func(msg string) error {
		return apierr.MalformedJSON.New(msg).With("constraint", "content_type")
	}
	if len(ct) == 0 {
		return bad("Content-Type header is missing; send application/json")
	}
	mt, params, err := mime.ParseMediaType(string(ct))
	if err != nil || mt != "application/json" {
		return bad("Content-Type must be application/json, got " + string(ct))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return bad("charset must be utf-8, got " + cs)
	}
	return nil
}

// decodeError classifies encoding/json's errors. The unknown-field error has no type of
// its own; its text (`json: unknown field "x"`) is stable since Go 1.10.
func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return apierr.MalformedJSON.New("body is not valid JSON: "+syn.Error()).With("offset", syn.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return apierr.MalformedJSON.New("body is not valid JSON: unexpected end of input")
	case errors.As(err, &typ):
		expected := jsonKind(typ.Type)
		e := apierr.ValidationFailed.Newf("wrong type: got JSON %s, want %s", typ.Value, expected).
			With("constraint", "type").With("expected", expected)
		if typ.Field != "" {
			e = e.WithField(typ.Field)
		}
		return e
	}
	const unknownPrefix = `json: unknown field "`
	if msg := err.Error(); strings.HasPrefix(msg, unknownPrefix) {
		field := strings.TrimSuffix(strings.TrimPrefix(msg, unknownPrefix), `"`)
		return apierr.ValidationFailed.New("unknown field "+field).
			WithField(field).With("constraint", "unknown_field")
	}
	// A custom UnmarshalJSON (enums, timestamps) refused the value.
	return apierr.ValidationFailed.New("invalid value: "+err.Error()).With("constraint", "format")
}

// jsonKind names a Go type by the JSON kind a client must send.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.Number]() {
		return "number"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	}
	return t.String()
}

// errNotJSON stops strictKeys on input that is not JSON; Decode then reports it.
var errNotJSON = errors.New("not JSON")

// strictKeys refuses what encoding/json would read leniently: a key repeated in one
// object (2000 malformed_json, constraint "duplicate_key"; encoding/json keeps the last)
// and a key that names a field only when compared case-insensitively (2001
// validation_failed, constraint "unknown_field"; encoding/json would fold "AMOUNT" onto
// amount). A signer and a server reading the same bytes differently is how a signed body
// comes to mean something its author did not sign. t is the type Decode will fill; inside
// values whose type decodes itself (json.Unmarshaler, json.RawMessage, any) only
// duplicates are checked.
func strictKeys(body []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := walkJSON(dec, t)
	if errors.Is(err, errNotJSON) {
		return nil
	}
	return err
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func walkJSON(dec *json.Decoder, t reflect.Type) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(unmarshalerType) || t.Kind() == reflect.Interface) {
		t = nil
	}
	tok, err := dec.Token()
	if err != nil {
		return errNotJSON
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	switch d {
	case '{':
		var fields map[string]reflect.Type
		var elem reflect.Type
		if t != nil {
			switch t.Kind() {
			case reflect.Struct:
				fields = jsonFields(t)
			case reflect.Map:
				elem = t.Elem()
			}
		}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return errNotJSON
			}
			key, ok := kt.(string)
			if !ok {
				return errNotJSON
			}
			if seen[key] {
				return apierr.MalformedJSON.New("key "+strconv.Quote(key)+" appears twice in one object").
					WithField(key).With("constraint", "duplicate_key")
			}
			seen[key] = true
			next := elem
			if fields != nil {
				ft, ok := fields[key]
				if !ok {
					return apierr.ValidationFailed.New("unknown field "+key+" (keys are case-sensitive)").
						WithField(key).With("constraint", "unknown_field")
				}
				next = ft
			}
			if err := walkJSON(dec, next); err != nil {
				return err
			}
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			if err := walkJSON(dec, elem); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return errNotJSON
	}
	return nil
}

var jsonFieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps the exact JSON names of struct t's fields (embedded structs' promoted
// fields included) to their types, as encoding/json names them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := jsonFieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, dup := m[k]; !dup {
						m[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	jsonFieldCache.Store(t, m)
	return m
}
