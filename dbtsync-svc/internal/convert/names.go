package convert

import (
	"strconv"
	"strings"
	"unicode"
)

// memberName returns the Cube member (or cube) name for a warehouse name: the name itself
// when it is a valid Cube identifier and not reserved, otherwise a deterministic rewrite:
// lower case, every run of other characters one underscore, a leading digit prefixed with
// an underscore, a reserved name suffixed with _col ("Order Date" -> order_date,
// "2fa_enabled" -> _2fa_enabled, "sql" -> sql_col). changed reports a rewrite.
func memberName(orig string) (name string, changed bool) {
	if isIdent(orig) && !reservedMember[orig] {
		return orig, false
	}
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(orig) {
		if r < unicode.MaxASCII && (r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
			under = r == '_'
			continue
		}
		if !under && b.Len() > 0 {
			b.WriteByte('_')
			under = true
		}
	}
	name = strings.TrimRight(b.String(), "_")
	switch {
	case name == "":
		name = "col"
	case name[0] >= '0' && name[0] <= '9':
		name = "_" + name
	}
	if reservedMember[name] {
		name += "_col"
	}
	return name, true
}

// namespace hands out names unique within one cube (dimensions and measures share it).
type namespace map[string]bool

// claim returns want, or want_2, want_3, … when taken, and records it.
func (ns namespace) claim(want string) string {
	name := want
	for i := 2; ns[name]; i++ {
		name = want + "_" + strconv.Itoa(i)
	}
	ns[name] = true
	return name
}

// cubeText makes free text (a description, a title, a meta string) safe for Cube's YAML
// compiler, which reads every such string as a Python f-string and a file with Jinja
// delimiters as a Jinja template: braces become parentheses, a backslash is doubled so it
// survives the f-string, and control characters other than tab and newline are dropped.
func cubeText(s string) string {
	if !strings.ContainsAny(s, "{}\\") && !hasControl(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		switch {
		case r == '{':
			b.WriteByte('(')
		case r == '}':
			b.WriteByte(')')
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case unicode.IsControl(r):
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func hasControl(s string) bool {
	for _, r := range s {
		if r != '\t' && r != '\n' && unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// sqlSafe reports whether a warehouse name can appear in a member's SQL: Cube reads the
// SQL as an f-string whose braces are member references, so a name with a brace cannot.
func sqlSafe(s string) bool { return !strings.ContainsAny(s, "{}") && !hasControl(s) }

// sqlEscape doubles backslashes so they survive Cube's f-string reading of the SQL.
func sqlEscape(s string) string { return strings.ReplaceAll(s, `\`, `\\`) }

// isIdent reports whether s matches ^[A-Za-z_][A-Za-z0-9_]*$, Cube's identifier rule (a
// loop rather than a regexp: it runs for every column of every model).
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}
