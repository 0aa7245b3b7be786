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

// namespace hands out unique names: a cube's members (dimensions and measures share
// one namespace), or the cubes and views. A short list with each name's hash until it
// grows (a cube has a few dozen members, and a map each was a tenth of a conversion's
// memory), then a map.
type namespace struct {
	list   []string
	hashes []uint32
	set    map[string]bool
}

// hash32 is FNV-1a.
func hash32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

func (ns *namespace) has(name string) bool { return ns.hasHash(name, hash32(name)) }

func (ns *namespace) hasHash(name string, h uint32) bool {
	if ns.set != nil {
		return ns.set[name]
	}
	for i, x := range ns.hashes {
		if x == h && ns.list[i] == name {
			return true
		}
	}
	return false
}

func (ns *namespace) add(name string) { ns.addHash(name, hash32(name)) }

func (ns *namespace) addHash(name string, h uint32) {
	if ns.set == nil && len(ns.list) < 64 {
		ns.list, ns.hashes = append(ns.list, name), append(ns.hashes, h)
		return
	}
	if ns.set == nil {
		ns.set = make(map[string]bool, 2*len(ns.list))
		for _, n := range ns.list {
			ns.set[n] = true
		}
		ns.list, ns.hashes = nil, nil
	}
	ns.set[name] = true
}

// release frees a name.
func (ns *namespace) release(name string) {
	if ns.set != nil {
		delete(ns.set, name)
		return
	}
	for i, n := range ns.list {
		if n == name {
			ns.list = append(ns.list[:i], ns.list[i+1:]...)
			ns.hashes = append(ns.hashes[:i], ns.hashes[i+1:]...)
			return
		}
	}
}

// claim returns want, or want_2, want_3, … when taken, and records it.
func (ns *namespace) claim(want string) string {
	name, h := want, hash32(want)
	for i := 2; ns.hasHash(name, h); i++ {
		name = want + "_" + strconv.Itoa(i)
		h = hash32(name)
	}
	ns.addHash(name, h)
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
func sqlSafe(s string) bool {
	for i := 0; i < len(s); i++ { // printable ASCII without a brace: the common name, at once
		if c := s[i]; c < ' ' || c >= 0x7f || c == '{' || c == '}' {
			return !strings.ContainsAny(s, "{}") && !hasControl(s)
		}
	}
	return true
}

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
