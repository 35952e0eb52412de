package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/yaml"

	docpage "github.com/slipway-dev/slipway/internal/testsupport/docs"
)

// docs/reference/helm-values.md is generated from the chart (`make docs`): every value of
// values.yaml and values.schema.json with its default, its type as the schema checks it, and its
// description (the values.yaml comment above it, then the schema's description), so a value is
// described once, in the chart.
func TestHelmValuesReference(t *testing.T) {
	var schema map[string]any
	b, err := os.ReadFile("helm/slipway/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile("helm/slipway/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	v := valuesDoc{t: t, defs: schema["definitions"].(map[string]any)}
	page := "# Helm values\n\n" +
		"Generated from the chart, [deploy/helm/slipway](../../deploy/helm/slipway), by `make docs` " +
		"(`TestHelmValuesReference` fails when it is stale): every value of `values.yaml` and " +
		"`values.schema.json`, its default (—: none), its type as the schema checks it, and what the comment " +
		"above it in `values.yaml` says (a comment describes the keys under it up to the next blank line or " +
		"comment), then the schema's description.\n"
	for _, e := range v.entries(doc.Content[0], schema) {
		page += "\n## `" + e.key + "`\n\n"
		if d := e.describe(""); d != "" {
			page += d + "\n\n"
		}
		var rows [][]string
		if e.schema["properties"] == nil {
			rows = append(rows, v.row(e.key, e, "")) // a value of its own: described above
		} else {
			rows = v.rows(e.key, e)
		}
		page += docpage.Table([]string{"value", "default", "type", "description"}, rows)
	}
	docpage.CheckGenerated(t, "../docs/reference/helm-values.md", page)
}

// valuesDoc walks values.yaml beside the schema.
type valuesDoc struct {
	t    *testing.T
	defs map[string]any // the schema's definitions
}

// entry is one key of a mapping: in values.yaml (value, nil if only the schema has it), in the
// schema (resolved), and what describes it.
type entry struct {
	key    string
	value  *yaml.Node
	schema map[string]any
	// comment is the values.yaml comment on the key; shared says that it has none and the comment of
	// the key before it covers it too.
	comment     string
	shared      bool
	description string // the schema's
}

// describe is e's description as Markdown; commented is the key whose comment covers e if shared.
func (e entry) describe(commented string) string {
	d := docpage.Prose(strings.TrimSpace(e.comment + " " + e.description))
	if e.shared {
		d = strings.TrimSpace("See `" + commented + "`. " + d)
	}
	return d
}

// entries returns the keys of mapping (nil: none in values.yaml) in values.yaml's order, then the
// keys only the schema has, sorted.
func (v valuesDoc) entries(mapping *yaml.Node, schema map[string]any) []entry {
	props, _ := schema["properties"].(map[string]any)
	var out []entry
	seen := map[string]bool{}
	prevLine, prevCommented := 0, false
	if mapping != nil {
		for i := 0; i+1 < len(mapping.Content); i += 2 {
			k, val := mapping.Content[i], mapping.Content[i+1]
			seen[k.Value] = true
			s, ok := props[k.Value].(map[string]any)
			if !ok {
				v.t.Errorf("values.yaml line %d: %s is not in values.schema.json", k.Line, k.Value)
				continue
			}
			e := entry{key: k.Value, value: val, schema: v.resolve(s)}
			e.description = description(s, e.schema)
			e.comment = strings.TrimSpace(comment(k.HeadComment) + " " + comment(k.LineComment))
			e.shared = e.comment == "" && prevCommented && k.Line == prevLine+1
			prevLine, prevCommented = k.Line, e.comment != "" || e.shared
			out = append(out, e)
		}
	}
	var only []string
	for k := range props {
		if !seen[k] {
			only = append(only, k)
		}
	}
	sort.Strings(only)
	for _, k := range only {
		s := props[k].(map[string]any)
		out = append(out, entry{key: k, schema: v.resolve(s), description: description(s, v.resolve(s))})
	}
	return out
}

// rows returns a row for every value under e (path its key path): a leaf, or a mapping whose keys the
// schema does not list (affinity, resources.requests), is one value; a described mapping has a row
// of its own before its keys.
func (v valuesDoc) rows(path string, e entry) [][]string {
	var out [][]string
	var commented string
	for _, c := range v.entries(e.value, e.schema) {
		p := path + "." + c.key
		if !c.shared {
			commented = p
		}
		describe := c.describe(commented)
		if c.schema["properties"] == nil {
			out = append(out, v.row(p, c, describe))
			continue
		}
		if describe != "" {
			out = append(out, v.row(p, entry{schema: c.schema}, describe))
		}
		out = append(out, v.rows(p, c)...)
	}
	return out
}

// row is the table row of the value at path.
func (v valuesDoc) row(path string, e entry, describe string) []string {
	def := "—"
	if e.value != nil {
		var x any
		if err := e.value.Decode(&x); err != nil {
			v.t.Fatalf("%s: %v", path, err)
		}
		j, err := json.Marshal(x)
		if err != nil {
			v.t.Fatalf("%s: %v", path, err)
		}
		def = "`" + string(j) + "`"
	} else if e.schema["properties"] != nil {
		def = ""
	}
	return []string{"`" + path + "`", def, v.typeOf(e.schema), describe}
}

// resolve follows s's $ref into the schema's definitions; s's own keywords win.
func (v valuesDoc) resolve(s map[string]any) map[string]any {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	def, ok := v.defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	if !ok {
		v.t.Fatalf("values.schema.json: no definition %s", ref)
	}
	out := map[string]any{}
	for k, x := range v.resolve(def) {
		out[k] = x
	}
	for k, x := range s {
		if k != "$ref" {
			out[k] = x
		}
	}
	return out
}

// typeOf says what s admits, in words: its type, enum or alternatives, and its bounds.
func (v valuesDoc) typeOf(s map[string]any) string {
	var base string
	switch ty := s["type"].(type) {
	case string:
		base = ty
	case []any:
		var ts []string
		for _, x := range ty {
			ts = append(ts, fmt.Sprint(x))
		}
		base = strings.Join(ts, " or ")
	}
	if enum, ok := s["enum"].([]any); ok {
		var vs []string
		for _, x := range enum {
			j, _ := json.Marshal(x)
			vs = append(vs, "`"+string(j)+"`")
		}
		base = "one of " + strings.Join(vs, ", ")
	}
	if alts, ok := s["anyOf"].([]any); ok {
		var as []string
		for _, a := range alts {
			as = append(as, v.typeOf(v.resolve(a.(map[string]any))))
		}
		base = strings.Join(as, ", or ")
	}
	if items, ok := s["items"].(map[string]any); ok {
		base += " of " + v.typeOf(v.resolve(items))
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		base += " of " + v.typeOf(v.resolve(ap))
	}
	var bounds []string
	if x, ok := s["minimum"]; ok {
		bounds = append(bounds, fmt.Sprintf("≥ %v", x))
	}
	if x, ok := s["maximum"]; ok {
		bounds = append(bounds, fmt.Sprintf("≤ %v", x))
	}
	for _, k := range []string{"minLength", "minItems"} {
		switch x, ok := s[k]; {
		case !ok || x == 0.0:
		case x == 1.0:
			bounds = append(bounds, "not empty")
		default:
			bounds = append(bounds, fmt.Sprintf("%s %v", k, x))
		}
	}
	if req, ok := s["required"].([]any); ok {
		var rs []string
		for _, r := range req {
			rs = append(rs, "`"+fmt.Sprint(r)+"`")
		}
		bounds = append(bounds, "requires "+strings.Join(rs, ", "))
	}
	if x, ok := s["pattern"].(string); ok {
		bounds = append(bounds, "matching `"+x+"`")
	}
	if not, ok := s["not"].(map[string]any); ok {
		if c, ok := not["const"]; ok {
			j, _ := json.Marshal(c)
			bounds = append(bounds, "not `"+string(j)+"`")
		} else {
			v.t.Errorf("values.schema.json: cannot say what %v refuses", not)
		}
	}
	return strings.Join(slices.Insert(bounds, 0, base), ", ")
}

// description is the schema's description of a value: its own, else its definition's.
func description(own, resolved map[string]any) string {
	if d, ok := own["description"].(string); ok {
		return d
	}
	d, _ := resolved["description"].(string)
	return d
}

// comment is a YAML comment as one line of text.
func comment(c string) string {
	var words []string
	for _, l := range strings.Split(c, "\n") {
		words = append(words, strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), "#"))...)
	}
	return strings.Join(words, " ")
}
