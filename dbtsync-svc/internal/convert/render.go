package convert

import (
	"sort"
	"strconv"
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
type emitter struct{ buf []byte }

func (b *emitter) str(s string) { b.buf = append(b.buf, s...) }

func (b *emitter) ch(c byte) { b.buf = append(b.buf, c) }

func (b *emitter) kv(indent, key, val string, quote bool) {
	b.str(indent)
	b.str(key)
	b.str(": ")
	if quote {
		b.quote(val)
	} else {
		b.str(val)
	}
	b.ch('\n')
}

// quote writes s as strconv.Quote does, without its rune-by-rune work for the common
// string of printable ASCII that needs no escape.
func (b *emitter) quote(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c >= 0x7f || c == '"' || c == '\\' {
			b.str(strconv.Quote(s))
			return
		}
	}
	b.ch('"')
	b.str(s)
	b.ch('"')
}

// text writes free text, when there is some: through cubeText, quoted; plain
// printable ASCII without a brace, a backslash or a quote (the common text) as it is.
func (b *emitter) text(indent, key, val string) {
	if val == "" {
		return
	}
	for i := 0; i < len(val); i++ {
		if c := val[i]; c < ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '{' || c == '}' {
			b.kv(indent, key, cubeText(val), true)
			return
		}
	}
	b.str(indent)
	b.str(key)
	b.str(": \"")
	b.str(val)
	b.str("\"\n")
}

func (b *emitter) meta(indent string, m map[string]any) {
	if len(m) > 0 {
		b.str(indent)
		b.str("meta: ")
		writeFlow(b, m, 0)
		b.ch('\n')
	}
}

// appendYAML appends the cube's YAML to dst.
func (c *cube) appendYAML(dst []byte) []byte {
	if size := 256 + 160*len(c.Dimensions) + 96*len(c.Measures); cap(dst)-len(dst) < size {
		dst = append(make([]byte, 0, len(dst)+size), dst...)
	}
	b := emitter{dst}
	b.str("cubes:\n")
	b.kv("  - ", "name", c.Name, false)
	b.text("    ", "title", c.Title)
	b.kv("    ", "sql_table", c.SQLTable, true)
	b.text("    ", "description", c.Description)
	b.meta("    ", c.Meta)
	if len(c.Dimensions) > 0 {
		b.str("    dimensions:\n")
		for _, d := range c.Dimensions {
			b.kv("      - ", "name", d.Name, false)
			b.text("        ", "title", d.Title)
			if d.SQL == "" { // {CUBE}.<column>, the column a plain identifier
				b.str("        sql: \"{CUBE}.")
				b.str(d.column)
				b.str("\"\n")
			} else {
				b.kv("        ", "sql", d.SQL, true)
			}
			b.kv("        ", "type", d.Type, false)
			if d.PrimaryKey {
				b.kv("        ", "primary_key", "true", false)
			}
			b.text("        ", "description", d.Description)
			b.meta("        ", d.Meta)
		}
	}
	b.str("    measures:\n")
	for _, m := range c.Measures {
		m.render(&b)
	}
	if len(c.Joins) > 0 {
		b.str("    joins:\n")
		for _, j := range c.Joins {
			b.kv("      - ", "name", j.Name, false)
			b.kv("        ", "sql", j.SQL, true)
			b.kv("        ", "relationship", j.Relationship, false)
		}
	}
	return b.buf
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
		b.str("        filters:\n")
		for _, f := range m.Filters {
			b.kv("          - ", "sql", f.SQL, true)
		}
	}
	if rw := m.RollingWindow; rw != nil {
		b.str("        rolling_window:\n")
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
		b.str("        time_shift:\n")
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
func writeFlow(b *emitter, v any, depth int) {
	if depth > maxMetaDepth {
		b.str("null")
		return
	}
	switch x := v.(type) {
	case nil:
		b.str("null")
	case bool:
		b.str(strconv.FormatBool(x))
	case float64:
		b.str(strconv.FormatFloat(x, 'g', -1, 64))
	case string:
		b.str(strconv.Quote(cubeText(x)))
	case []any:
		b.str("[ ")
		for i, e := range x {
			if i > 0 {
				b.str(", ")
			}
			writeFlow(b, e, depth+1)
		}
		b.str(" ]")
	case map[string]any:
		b.str("{ ")
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b.str(", ")
			}
			b.str(strconv.Quote(cubeText(k)))
			b.str(": ")
			writeFlow(b, x[k], depth+1)
		}
		b.str(" }")
	default:
		b.str("null")
	}
}

// appendYAML appends the view's YAML to dst.
func (v *view) appendYAML(dst []byte) []byte {
	b := emitter{dst}
	b.str("views:\n")
	b.kv("  - ", "name", v.Name, false)
	b.text("    ", "title", v.Title)
	b.text("    ", "description", v.Description)
	b.str("    cubes:\n")
	for _, c := range v.Cubes {
		b.kv("      - ", "join_path", c.JoinPath, false)
		b.str("        includes:\n")
		for _, m := range c.Includes {
			if m.Alias == "" {
				b.str("          - ")
				b.str(m.Name)
				b.ch('\n')
				continue
			}
			b.kv("          - ", "name", m.Name, false)
			b.kv("            ", "alias", m.Alias, false)
		}
	}
	if len(v.Filters) > 0 {
		b.str("    default_filters:\n")
		for _, f := range v.Filters {
			b.kv("      - ", "member", f.Member, false)
			b.kv("        ", "operator", f.Operator, false)
			if len(f.Values) > 0 {
				b.str("        values:\n")
				for _, val := range f.Values {
					b.str("          - ")
					b.buf = strconv.AppendQuote(b.buf, val)
					b.ch('\n')
				}
			}
		}
	}
	return b.buf
}
