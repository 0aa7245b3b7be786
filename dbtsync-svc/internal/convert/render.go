package convert

import (
	"sort"
	"strconv"
	"strings"
)

// sortedKeys is the keys of m in order: the output is deterministic.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// render writes the cube as YAML. A small emitter rather than a YAML library: the shape is
// fixed, and a generic encoder costs most of a large conversion's time. Names are valid
// identifiers, written plain; every other string is double-quoted (Go quoting is valid
// YAML quoting), and free text goes through cubeText first.
func (c *cube) render() string {
	var b strings.Builder
	b.Grow(256 + 160*len(c.Dimensions) + 96*len(c.Measures))
	kv := func(indent, key, val string, quote bool) {
		b.WriteString(indent)
		b.WriteString(key)
		b.WriteString(": ")
		if quote {
			b.WriteString(strconv.Quote(val))
		} else {
			b.WriteString(val)
		}
		b.WriteByte('\n')
	}
	text := func(indent, key, val string) {
		if val != "" {
			kv(indent, key, cubeText(val), true)
		}
	}
	meta := func(indent string, m map[string]any) {
		if len(m) > 0 {
			b.WriteString(indent)
			b.WriteString("meta: ")
			writeFlow(&b, m, 0)
			b.WriteByte('\n')
		}
	}
	b.WriteString("cubes:\n")
	kv("  - ", "name", c.Name, false)
	text("    ", "title", c.Title)
	kv("    ", "sql_table", c.SQLTable, true)
	text("    ", "description", c.Description)
	meta("    ", c.Meta)
	if len(c.Dimensions) > 0 {
		b.WriteString("    dimensions:\n")
		for _, d := range c.Dimensions {
			kv("      - ", "name", d.Name, false)
			text("        ", "title", d.Title)
			kv("        ", "sql", d.SQL, true)
			kv("        ", "type", d.Type, false)
			if d.PrimaryKey {
				kv("        ", "primary_key", "true", false)
			}
			text("        ", "description", d.Description)
			meta("        ", d.Meta)
		}
	}
	b.WriteString("    measures:\n")
	for _, m := range c.Measures {
		kv("      - ", "name", m.Name, false)
		if m.SQL != "" {
			kv("        ", "sql", m.SQL, true)
		}
		kv("        ", "type", m.Type, false)
		text("        ", "title", m.Title)
		text("        ", "description", m.Description)
		if len(m.Filters) > 0 {
			b.WriteString("        filters:\n")
			for _, f := range m.Filters {
				kv("          - ", "sql", f.SQL, true)
			}
		}
	}
	if len(c.Joins) > 0 {
		b.WriteString("    joins:\n")
		for _, j := range c.Joins {
			kv("      - ", "name", j.Name, false)
			kv("        ", "sql", j.SQL, true)
			kv("        ", "relationship", j.Relationship, false)
		}
	}
	return b.String()
}

// maxMetaDepth bounds how deep a meta value is written; deeper values become null.
const maxMetaDepth = 16

// writeFlow writes a decoded JSON value as a YAML flow value. Braces are spaced ("{ k: v }")
// so that nested objects never put two braces together, which Cube would take for Jinja.
func writeFlow(b *strings.Builder, v any, depth int) {
	if depth > maxMetaDepth {
		b.WriteString("null")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case float64:
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	case string:
		b.WriteString(strconv.Quote(cubeText(x)))
	case []any:
		b.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeFlow(b, e, depth+1)
		}
		b.WriteString(" ]")
	case map[string]any:
		b.WriteString("{ ")
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(cubeText(k)))
			b.WriteString(": ")
			writeFlow(b, x[k], depth+1)
		}
		b.WriteString(" }")
	default:
		b.WriteString("null")
	}
}
