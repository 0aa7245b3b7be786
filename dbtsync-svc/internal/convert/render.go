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

// emitter writes the fixed YAML shape of the data model. A small emitter rather than a
// YAML library: the shape is fixed, and a generic encoder costs most of a large
// conversion's time. Names are valid identifiers, written plain; every other string is
// double-quoted (Go quoting is valid YAML quoting), and free text goes through cubeText
// first.
type emitter struct{ strings.Builder }

func (b *emitter) kv(indent, key, val string, quote bool) {
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

// text writes free text, when there is some.
func (b *emitter) text(indent, key, val string) {
	if val != "" {
		b.kv(indent, key, cubeText(val), true)
	}
}

func (b *emitter) meta(indent string, m map[string]any) {
	if len(m) > 0 {
		b.WriteString(indent)
		b.WriteString("meta: ")
		writeFlow(&b.Builder, m, 0)
		b.WriteByte('\n')
	}
}

// render writes the cube as YAML.
func (c *cube) render() string {
	var b emitter
	b.Grow(256 + 160*len(c.Dimensions) + 96*len(c.Measures))
	b.WriteString("cubes:\n")
	b.kv("  - ", "name", c.Name, false)
	b.text("    ", "title", c.Title)
	b.kv("    ", "sql_table", c.SQLTable, true)
	b.text("    ", "description", c.Description)
	b.meta("    ", c.Meta)
	if len(c.Dimensions) > 0 {
		b.WriteString("    dimensions:\n")
		for _, d := range c.Dimensions {
			b.kv("      - ", "name", d.Name, false)
			b.text("        ", "title", d.Title)
			b.kv("        ", "sql", d.SQL, true)
			b.kv("        ", "type", d.Type, false)
			if d.PrimaryKey {
				b.kv("        ", "primary_key", "true", false)
			}
			b.text("        ", "description", d.Description)
			b.meta("        ", d.Meta)
		}
	}
	b.WriteString("    measures:\n")
	for _, m := range c.Measures {
		m.render(&b)
	}
	if len(c.Joins) > 0 {
		b.WriteString("    joins:\n")
		for _, j := range c.Joins {
			b.kv("      - ", "name", j.Name, false)
			b.kv("        ", "sql", j.SQL, true)
			b.kv("        ", "relationship", j.Relationship, false)
		}
	}
	return b.String()
}

func (m *measure) render(b *emitter) {
	b.kv("      - ", "name", m.Name, false)
	if m.SQL != "" {
		b.kv("        ", "sql", m.SQL, true)
	}
	b.kv("        ", "type", m.Type, false)
	b.text("        ", "title", m.Title)
	b.text("        ", "description", m.Description)
	if len(m.Filters) > 0 {
		b.WriteString("        filters:\n")
		for _, f := range m.Filters {
			b.kv("          - ", "sql", f.SQL, true)
		}
	}
	if rw := m.RollingWindow; rw != nil {
		b.WriteString("        rolling_window:\n")
		if rw.Trailing != "" {
			b.kv("          ", "trailing", rw.Trailing, true)
		}
		if rw.Type != "" {
			b.kv("          ", "type", rw.Type, false)
			b.kv("          ", "granularity", rw.Granularity, false)
		}
	}
	if m.MultiStage {
		b.kv("        ", "multi_stage", "true", false)
	}
	if ts := m.TimeShift; ts != nil {
		b.WriteString("        time_shift:\n")
		item := "          - "
		if ts.TimeDimension != "" {
			b.kv(item, "time_dimension", ts.TimeDimension, false)
			item = "            "
		}
		b.kv(item, "interval", ts.Interval, true)
		b.kv("            ", "type", "prior", false)
	}
	if m.Hidden {
		b.kv("        ", "public", "false", false)
	}
	b.meta("        ", m.Meta)
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

// render writes the view as YAML.
func (v *view) render() string {
	var b emitter
	b.WriteString("views:\n")
	b.kv("  - ", "name", v.Name, false)
	b.text("    ", "title", v.Title)
	b.text("    ", "description", v.Description)
	b.WriteString("    cubes:\n")
	for _, c := range v.Cubes {
		b.kv("      - ", "join_path", c.JoinPath, false)
		b.WriteString("        includes:\n")
		for _, m := range c.Includes {
			if m.Alias == "" {
				b.WriteString("          - " + m.Name + "\n")
				continue
			}
			b.kv("          - ", "name", m.Name, false)
			b.kv("            ", "alias", m.Alias, false)
		}
	}
	if len(v.Filters) > 0 {
		b.WriteString("    default_filters:\n")
		for _, f := range v.Filters {
			b.kv("      - ", "member", f.Member, false)
			b.kv("        ", "operator", f.Operator, false)
			if len(f.Values) > 0 {
				b.WriteString("        values:\n")
				for _, val := range f.Values {
					b.WriteString("          - " + strconv.Quote(val) + "\n")
				}
			}
		}
	}
	return b.String()
}
