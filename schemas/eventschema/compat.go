package eventschema

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// A Change is one difference between a released schema file and the current one.
// Breaking changes are those that let a consumer written against the released copy
// misread a current record, or that make a record valid under the released copy invalid
// now: a removed file, field or $defs entry; a changed type, const, pattern or $ref; a new
// required field or a field no longer required; a removed enum value; a tightened bound;
// additionalProperties closed; a new conditional rule (allOf entry) other than the
// envelope's dispatch for a new event type. Additive changes (new files, new optional
// fields, new enum values, new event types, loosened bounds, new descriptions) are not.
type Change struct {
	File     string
	Path     string // JSON pointer into the schema
	What     string
	Breaking bool
}

func (c Change) String() string {
	kind := "additive"
	if c.Breaking {
		kind = "BREAKING"
	}
	return fmt.Sprintf("%s %s%s: %s", kind, c.File, c.Path, c.What)
}

// Versions of the released copies live in directories v1, v2, ... of the released root.
func latestRelease(root fs.FS) (int, error) {
	dirs, err := fs.ReadDir(root, ".")
	if err != nil {
		return 0, err
	}
	latest := 0
	for _, d := range dirs {
		if n, err := strconv.Atoi(strings.TrimPrefix(d.Name(), "v")); err == nil && d.IsDir() && strings.HasPrefix(d.Name(), "v") && n > latest {
			latest = n
		}
	}
	if latest == 0 {
		return 0, fmt.Errorf("no released copy (v1, v2, ...) found")
	}
	return latest, nil
}

// Check compares the current schema files with the latest released copy under
// releasedRoot (releasedRoot/vN/*.schema.json) and returns an error naming every breaking
// change of a file whose version did not rise. A file's version is its data's version:
// marketdata's properties.version.const, else the file's "x-event-version", else the
// envelope's event_version const. changes lists every difference found.
func Check(releasedRoot, current fs.FS) (changes []Change, err error) {
	n, err := latestRelease(releasedRoot)
	if err != nil {
		return nil, err
	}
	released, err := fs.Sub(releasedRoot, fmt.Sprintf("v%d", n))
	if err != nil {
		return nil, err
	}
	oldDocs, err := loadDocs(released)
	if err != nil {
		return nil, fmt.Errorf("released v%d: %w", n, err)
	}
	newDocs, err := loadDocs(current)
	if err != nil {
		return nil, err
	}
	var blocking []string
	for _, name := range sortedKeys(oldDocs) {
		nd, ok := newDocs[name]
		if !ok {
			c := Change{File: name, What: "schema file removed", Breaking: true}
			changes = append(changes, c)
			if version(newDocs, name) <= version(oldDocs, name) {
				blocking = append(blocking, c.String())
			}
			continue
		}
		oldV, newV := version(oldDocs, name), version(newDocs, name)
		if newV < oldV {
			blocking = append(blocking, fmt.Sprintf("%s: version went down from %d to %d", name, oldV, newV))
		}
		var cs []Change
		compareSchema(&cs, name, "", oldDocs[name], nd, name == EnvelopeFile)
		for _, c := range cs {
			if c.Breaking && newV <= oldV {
				blocking = append(blocking, c.String())
			}
		}
		changes = append(changes, cs...)
	}
	for _, name := range sortedKeys(newDocs) {
		if _, ok := oldDocs[name]; !ok {
			changes = append(changes, Change{File: name, What: "new schema file"})
		}
	}
	if len(blocking) > 0 {
		return changes, fmt.Errorf("breaking changes against released v%d without a higher event_version:\n  %s", n, strings.Join(blocking, "\n  "))
	}
	return changes, nil
}

func loadDocs(fsys fs.FS) (map[string]map[string]any, error) {
	names, err := fs.Glob(fsys, "*.schema.json")
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = doc
	}
	return out, nil
}

func version(docs map[string]map[string]any, name string) int {
	num := func(v any) (int, bool) {
		f, ok := v.(float64)
		return int(f), ok
	}
	doc := docs[name]
	if props, ok := doc["properties"].(map[string]any); ok {
		if v, ok := props["version"].(map[string]any); ok && name == MarketDataFile {
			if n, ok := num(v["const"]); ok {
				return n
			}
		}
	}
	if n, ok := num(doc["x-event-version"]); ok {
		return n
	}
	if env, ok := docs[EnvelopeFile]; ok {
		if props, ok := env["properties"].(map[string]any); ok {
			if v, ok := props["event_version"].(map[string]any); ok {
				if n, ok := num(v["const"]); ok {
					return n
				}
			}
		}
	}
	return 1
}

func compareSchema(out *[]Change, file, ptr string, oldV, newV any, envelope bool) {
	add := func(breaking bool, format string, args ...any) {
		p := ptr
		if p == "" {
			p = "/"
		}
		*out = append(*out, Change{File: file, Path: p, What: fmt.Sprintf(format, args...), Breaking: breaking})
	}
	o, okO := oldV.(map[string]any)
	n, okN := newV.(map[string]any)
	if !okO || !okN {
		if !reflect.DeepEqual(oldV, newV) {
			add(true, "schema changed from %s to %s", compact(oldV), compact(newV))
		}
		return
	}
	if ot, nt := typeSet(o), typeSet(n); !slices.Equal(ot, nt) {
		add(true, "type changed from %v to %v", ot, nt)
	}
	for _, k := range []string{"$ref", "const", "pattern", "format"} {
		ov, oh := o[k]
		nv, nh := n[k]
		if (oh || nh) && !reflect.DeepEqual(ov, nv) {
			add(true, "%s changed from %s to %s", k, compact(ov), compact(nv))
		}
	}
	if oe, ok := o["enum"].([]any); ok {
		ne, _ := n["enum"].([]any)
		for _, v := range oe {
			if !containsJSON(ne, v) {
				add(true, "enum value %s removed", compact(v))
			}
		}
		for _, v := range ne {
			if !containsJSON(oe, v) {
				add(false, "enum value %s added", compact(v))
			}
		}
	} else if _, ok := n["enum"]; ok {
		add(true, "enum added")
	}
	for _, k := range []string{"minimum", "exclusiveMinimum", "minLength", "minItems", "multipleOf"} {
		compareBound(add, k, o[k], n[k], func(old, new float64) bool { return new > old })
	}
	for _, k := range []string{"maximum", "exclusiveMaximum", "maxLength", "maxItems"} {
		compareBound(add, k, o[k], n[k], func(old, new float64) bool { return new < old })
	}
	oreq, nreq := stringSet(o["required"]), stringSet(n["required"])
	for _, f := range nreq {
		if !slices.Contains(oreq, f) {
			add(true, "new required field %q", f)
		}
	}
	for _, f := range oreq {
		if !slices.Contains(nreq, f) {
			add(true, "field %q no longer required", f)
		}
	}
	if closed(n) && !closed(o) {
		add(true, "additionalProperties closed")
	}
	for _, k := range []string{"properties", "$defs"} {
		op, _ := o[k].(map[string]any)
		np, _ := n[k].(map[string]any)
		for _, name := range sortedKeys(op) {
			child := ptr + "/" + k + "/" + name
			if _, ok := np[name]; !ok {
				what := "field"
				if k == "$defs" {
					what = "definition"
				}
				*out = append(*out, Change{File: file, Path: child, What: what + " removed", Breaking: true})
				continue
			}
			compareSchema(out, file, child, op[name], np[name], false)
		}
		for _, name := range sortedKeys(np) {
			if _, ok := op[name]; !ok {
				*out = append(*out, Change{File: file, Path: ptr + "/" + k + "/" + name, What: "added"})
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not", "if", "then", "else"} {
		ov, oh := o[k]
		nv, nh := n[k]
		switch {
		case oh && nh:
			compareSchema(out, file, ptr+"/"+k, ov, nv, false)
		case oh != nh && k != "additionalProperties":
			add(true, "%s %s", k, map[bool]string{true: "removed", false: "added"}[oh])
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		oa, _ := o[k].([]any)
		na, _ := n[k].([]any)
		if len(oa) == len(na) {
			for i := range oa {
				compareSchema(out, file, fmt.Sprintf("%s/%s/%d", ptr, k, i), oa[i], na[i], false)
			}
		} else {
			add(true, "%s changed from %d to %d alternatives", k, len(oa), len(na))
		}
	}
	compareAllOf(out, file, ptr, o["allOf"], n["allOf"], envelope)
}

// compareAllOf matches conditional rules by their `if`, so reordering is not a change.
func compareAllOf(out *[]Change, file, ptr string, oldV, newV any, envelope bool) {
	oa, _ := oldV.([]any)
	na, _ := newV.([]any)
	key := func(v any) string {
		if m, ok := v.(map[string]any); ok {
			if cond, ok := m["if"]; ok {
				return "if:" + compact(cond)
			}
		}
		return "rule:" + compact(v)
	}
	news := map[string]any{}
	for _, v := range na {
		news[key(v)] = v
	}
	olds := map[string]bool{}
	for _, v := range oa {
		k := key(v)
		olds[k] = true
		nv, ok := news[k]
		if !ok {
			*out = append(*out, Change{File: file, Path: ptr + "/allOf", What: "rule removed or changed: " + k, Breaking: true})
			continue
		}
		compareSchema(out, file, ptr+"/allOf["+k+"]", v, nv, false)
	}
	for _, v := range na {
		k := key(v)
		if olds[k] {
			continue
		}
		dispatch := false
		if envelope {
			if m, ok := v.(map[string]any); ok {
				var c struct {
					Properties struct {
						Event struct {
							Const string `json:"const"`
						} `json:"event"`
					} `json:"properties"`
				}
				b, _ := json.Marshal(m["if"])
				dispatch = json.Unmarshal(b, &c) == nil && c.Properties.Event.Const != ""
			}
		}
		what := "new rule " + k
		if dispatch {
			what = "new event type " + k
		}
		*out = append(*out, Change{File: file, Path: ptr + "/allOf", What: what, Breaking: !dispatch})
	}
}

func compareBound(add func(bool, string, ...any), k string, oldV, newV any, tighter func(old, new float64) bool) {
	of, oh := oldV.(float64)
	nf, nh := newV.(float64)
	switch {
	case !oh && nh:
		add(true, "%s %v added", k, nf)
	case oh && nh && tighter(of, nf):
		add(true, "%s tightened from %v to %v", k, of, nf)
	case oh && nh && of != nf, oh && !nh:
		add(false, "%s loosened", k)
	}
}

func typeSet(m map[string]any) []string {
	var ts []string
	switch t := m["type"].(type) {
	case string:
		ts = []string{t}
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok {
				ts = append(ts, s)
			}
		}
	}
	sort.Strings(ts)
	return ts
}

func stringSet(v any) []string {
	var out []string
	if a, ok := v.([]any); ok {
		for _, x := range a {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func closed(m map[string]any) bool {
	b, ok := m["additionalProperties"].(bool)
	return ok && !b
}

func containsJSON(list []any, v any) bool {
	for _, x := range list {
		if reflect.DeepEqual(x, v) {
			return true
		}
	}
	return false
}

func compact(v any) string {
	if v == nil {
		return "none"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
