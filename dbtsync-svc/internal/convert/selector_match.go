package convert

import (
	"strings"
)

// match reports whether the criterion's method matches the node.
func (g *selectGraph) match(c criterion, n *NodeInfo) bool {
	switch c.method {
	case "fqn":
		return len(n.FQN) > 0 && (fqnMatch(n.FQN, c.value, n.versioned) || fqnMatch(n.FQN[1:], c.value, n.versioned))
	case "tag":
		for _, t := range n.Tags {
			if fnmatch(t, c.value) {
				return true
			}
		}
	case "package":
		v := c.value
		if v == "this" && g.project != "" {
			v = g.project
		}
		return fnmatch(n.Package, v)
	case "file":
		base := n.Path[strings.LastIndexByte(n.Path, '/')+1:]
		stem := base
		if i := strings.LastIndexByte(base, '.'); i > 0 {
			stem = base[:i]
		}
		return n.Path != "" && (fnmatch(base, c.value) || fnmatch(stem, c.value))
	case "path":
		return pathMatch(c.value, n.Path) || pathMatch(c.value, n.PatchPath)
	}
	return false
}

// fqnMatch is dbt's is_selected_node: the selector is the node's name (for a model
// version, its model's name, or name.vN / name_vN), or a dotted prefix of its fully
// qualified name, matched by fnmatch from the first part with a wildcard to the end.
func fqnMatch(fqn []string, sel string, versioned bool) bool {
	if len(fqn) == 0 {
		return false
	}
	parts := strings.Split(sel, ".")
	if versioned && len(fqn) >= 2 {
		if fqn[len(fqn)-2] == sel {
			return true
		}
		if strings.Join(fqn[len(fqn)-2:], "_") == strings.Join(parts[max(0, len(parts)-2):], "_") {
			return true
		}
	} else if fqn[len(fqn)-1] == sel {
		return true
	}
	var flat []string
	for _, seg := range fqn {
		flat = append(flat, strings.Split(seg, ".")...)
	}
	if len(flat) < len(parts) {
		return false
	}
	for i, part := range parts {
		if strings.ContainsAny(part, "*?[]") {
			return fnmatch(strings.Join(flat[i:], "."), strings.Join(parts[i:], "."))
		}
		if flat[i] != part {
			return false
		}
	}
	return true
}

// pathMatch reports whether the glob (relative to the project, as dbt's path method
// globs it) names the file p or a directory above it. A part "**" is any number of
// directories; the other parts match one name each, by fnmatch.
func pathMatch(glob, p string) bool {
	if p == "" {
		return false
	}
	glob = cleanRel(glob)
	p = cleanRel(p)
	if glob == "." {
		return true
	}
	pat := strings.Split(glob, "/")
	names := strings.Split(p, "/")
	for n := len(names); n > 0; n-- { // the file, then each directory above it
		if segmentsMatch(pat, names[:n]) {
			return true
		}
	}
	return false
}

func cleanRel(p string) string {
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	p = strings.TrimRight(p, "/")
	if p == "" {
		return "."
	}
	return p
}

// segmentsMatch matches glob parts against path names; "**" by a loop over where it
// ends, so its cost is bounded by the product of the two lengths at each "**".
func segmentsMatch(pat, names []string) bool {
	// Dynamic programming over (pattern part, name): no recursion, O(len(pat)*len(names)).
	cur := make([]bool, len(names)+1)
	cur[0] = true
	for _, part := range pat {
		next := make([]bool, len(names)+1)
		for j := 0; j <= len(names); j++ {
			if !cur[j] {
				continue
			}
			if part == "**" {
				for k := j; k <= len(names); k++ {
					next[k] = true
				}
				continue
			}
			if j < len(names) && part != "" && fnmatch(names[j], part) {
				next[j+1] = true
			}
		}
		cur = next
	}
	return cur[len(names)]
}

// fnmatch is Python's fnmatch.fnmatchcase: "*" any run of characters ("/" and "."
// included), "?" one character, "[seq]" and "[!seq]" a class (a "]" first in it is
// literal; a "[" without its "]" is literal). Iterative, with one backtracking point
// per "*": O(len(name) * len(pattern)).
func fnmatch(name, pattern string) bool {
	n, p := []rune(name), []rune(pattern)
	ni, pi := 0, 0
	starP, starN := -1, 0
	for ni < len(n) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				starP, starN = pi, ni
				pi++
				continue
			case '?':
				ni++
				pi++
				continue
			case '[':
				if end, ok, matched := classMatch(p, pi, n[ni]); ok {
					if matched {
						ni++
						pi = end
						continue
					}
				} else if n[ni] == '[' {
					ni++
					pi++
					continue
				}
			default:
				if p[pi] == n[ni] {
					ni++
					pi++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starN++
		ni, pi = starN, starP+1
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// classMatch reads the class starting at p[i] == '[': ok false when it has no closing
// "]" (then "[" is literal); end is the index after it.
func classMatch(p []rune, i int, c rune) (end int, ok, matched bool) {
	j := i + 1
	negate := false
	if j < len(p) && p[j] == '!' {
		negate = true
		j++
	}
	start := j
	if j < len(p) && p[j] == ']' {
		j++
	}
	for j < len(p) && p[j] != ']' {
		j++
	}
	if j >= len(p) {
		return 0, false, false
	}
	set := p[start:j]
	for k := 0; k < len(set); k++ {
		if k+2 < len(set) && set[k+1] == '-' {
			if set[k] <= c && c <= set[k+2] {
				matched = true
			}
			k += 2
			continue
		}
		if set[k] == c {
			matched = true
		}
	}
	return j + 1, true, matched != negate
}

// bitset is a set of node indexes.
type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) clone() bitset  { return append(bitset(nil), b...) }
func (b bitset) or(o bitset) {
	for i := range b {
		b[i] |= o[i]
	}
}
func (b bitset) and(o bitset) {
	for i := range b {
		b[i] &= o[i]
	}
}
func (b bitset) andNot(o bitset) {
	for i := range b {
		b[i] &^= o[i]
	}
}
func (b bitset) fill(n int) {
	for i := range n {
		b.set(i)
	}
}
func (b bitset) members() []int32 {
	var out []int32
	for w, word := range b {
		for word != 0 {
			bit := 0
			for word&(1<<bit) == 0 {
				bit++
			}
			out = append(out, int32(w*64+bit))
			word &^= 1 << bit
		}
	}
	return out
}
