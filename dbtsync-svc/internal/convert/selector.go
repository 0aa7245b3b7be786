package convert

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A model selector in dbt's node-selection syntax (`dbt ls --select … --exclude …`):
// space-separated terms are a union, comma-separated parts of a term an intersection,
// and each part is one criterion:
//
//	[@][N+][method:]value[+N]
//
// Methods: fqn (the default: a model's name, or a dotted prefix of its fully qualified
// name, with fnmatch wildcards from the first part that has one), tag, path (a glob of
// the node's file or of a directory above it, relative to the project), file (the file
// name or its stem), package ("this" is the project). A value with a "/" is a path, one
// ending in .sql, .py or .csv a file, as dbt defaults. The graph operators select the
// node's ancestors (N+, N levels up; + unbounded) and descendants (+N), and @ a node's
// descendants with all of their ancestors; they need the manifest's dependency graph.
// What the selector picks of every node of the graph is what dbt picks; only models
// become cubes, and no model is added for being a parent of a selected one.

// SelectorLimits bound one selector; a limit of zero or less takes its
// DefaultSelectorLimits value.
type SelectorLimits struct {
	MaxBytes int // bytes of select, and of exclude, each
	MaxTerms int // criteria of select and exclude together
	// MaxSteps is the most graph edges the graph operators of one selection walk, all
	// together: a walk visits a node once (a BFS with a visited set), but each criterion
	// walks on its own.
	MaxSteps int
}

// DefaultSelectorLimits apply where SelectorLimits leaves a field zero.
var DefaultSelectorLimits = SelectorLimits{MaxBytes: 4096, MaxTerms: 64, MaxSteps: 20_000_000}

// WithDefaults is l with every limit not set at its DefaultSelectorLimits value.
func (l SelectorLimits) WithDefaults() SelectorLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultSelectorLimits.MaxBytes
	}
	if l.MaxTerms <= 0 {
		l.MaxTerms = DefaultSelectorLimits.MaxTerms
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = DefaultSelectorLimits.MaxSteps
	}
	return l
}

// SelectorError is a selector that cannot be read: Field is "select" or "exclude".
type SelectorError struct {
	Field  string
	Reason string
}

func (e *SelectorError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Reason) }

// ErrSelectorNeedsManifest is a selector with graph operators applied to a project read
// from its files (no manifest, so no dependency graph).
var ErrSelectorNeedsManifest = errors.New("the graph operators of a model selector (+, N+, +N, @) need a dbt manifest")

// SelectorLimitError is a selection whose graph walks passed MaxSteps.
type SelectorLimitError struct{ Value int }

func (e *SelectorLimitError) Error() string {
	return fmt.Sprintf("the model selector's graph operators walked more than their limit of %d edges", e.Value)
}

// Selector is a parsed select and exclude pair.
type Selector struct {
	Select, Exclude  string
	include, exclude [][]criterion // a union of intersections; nil include: everything
	limits           SelectorLimits
}

// criterion is one part of an intersection.
type criterion struct {
	method        string // fqn, tag, path, file, package
	value         string
	parents       bool
	parentsDepth  int // -1: unbounded
	children      bool
	childrenDepth int
	childrenAll   bool // @
}

func (c criterion) graph() bool { return c.parents || c.children || c.childrenAll }

// selectorMethods are the methods a criterion may name; the others dbt knows select
// what the data model has no use for, or need state this service does not keep.
var selectorMethods = map[string]bool{"fqn": true, "tag": true, "path": true, "file": true, "package": true}

var dbtOnlyMethods = map[string]bool{"group": true, "access": true, "source": true, "config": true, "test_name": true,
	"test_type": true, "resource_type": true, "state": true, "exposure": true, "metric": true, "result": true,
	"source_status": true, "version": true, "semantic_model": true, "saved_query": true, "unit_test": true}

// ParseSelector reads a select and an exclude expression ("" for none); an expression
// that cannot be read is a *SelectorError saying why.
func ParseSelector(sel, excl string, limits SelectorLimits) (*Selector, error) {
	limits = limits.WithDefaults()
	s := &Selector{Select: sel, Exclude: excl, limits: limits}
	terms := 0
	var err error
	if s.include, err = parseUnion("select", sel, limits, &terms); err != nil {
		return nil, err
	}
	if s.exclude, err = parseUnion("exclude", excl, limits, &terms); err != nil {
		return nil, err
	}
	return s, nil
}

// CheckSelector is ParseSelector's verdict on one field alone.
func CheckSelector(field, expr string, limits SelectorLimits) (graph bool, err error) {
	limits = limits.WithDefaults()
	terms := 0
	u, err := parseUnion(field, expr, limits, &terms)
	return unionGraph(u), err
}

func parseUnion(field, expr string, limits SelectorLimits, terms *int) ([][]criterion, error) {
	if len(expr) > limits.MaxBytes {
		return nil, &SelectorError{field, fmt.Sprintf("is %d bytes, over the limit of %d bytes", len(expr), limits.MaxBytes)}
	}
	if !utf8.ValidString(expr) {
		return nil, &SelectorError{field, "is not valid UTF-8"}
	}
	var union [][]criterion
	for _, term := range strings.Fields(expr) {
		var inter []criterion
		for _, part := range strings.Split(term, ",") {
			*terms++
			if *terms > limits.MaxTerms {
				return nil, &SelectorError{field, fmt.Sprintf("has more than %d criteria (select and exclude together), the limit", limits.MaxTerms)}
			}
			c, err := parseCriterion(part)
			if err != nil {
				return nil, &SelectorError{field, err.Error()}
			}
			inter = append(inter, c)
		}
		union = append(union, inter)
	}
	return union, nil
}

// parseCriterion reads one criterion as dbt's pattern does:
// \A(@)?((\d*)\+)?(([\w.]+):)?(.*?)(\+(\d*))?\Z.
func parseCriterion(raw string) (criterion, error) {
	c := criterion{parentsDepth: -1, childrenDepth: -1}
	s := raw
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		c.childrenAll, s = true, rest
	}
	if i := digitsPrefix(s); i < len(s) && s[i] == '+' {
		c.parents, c.parentsDepth, s = true, depth(s[:i]), s[i+1:]
	}
	if i := wordPrefix(s); i > 0 && i < len(s) && s[i] == ':' {
		c.method, s = s[:i], s[i+1:]
	}
	if k := strings.LastIndexByte(s, '+'); k >= 0 && digitsPrefix(s[k+1:]) == len(s)-k-1 {
		c.children, c.childrenDepth, s = true, depth(s[k+1:]), s[:k]
	}
	c.value = s
	if c.children && c.childrenAll {
		return c, fmt.Errorf("%q: the \"@\" prefix and the \"+\" suffix cannot be used together", raw)
	}
	if c.value == "" {
		return c, fmt.Errorf("%q names nothing to select", raw)
	}
	if c.method == "" {
		c.method = defaultMethod(c.value)
	}
	if !selectorMethods[c.method] {
		name, _, _ := strings.Cut(c.method, ".")
		switch {
		case selectorMethods[name]:
			return c, fmt.Errorf("%q: method %q takes no arguments", raw, name)
		case dbtOnlyMethods[name]:
			return c, fmt.Errorf("%q: method %q is not supported for models here; use fqn, tag, path, file or package", raw, name)
		}
		return c, fmt.Errorf("%q: %q is not a valid method name; use fqn, tag, path, file or package", raw, c.method)
	}
	return c, nil
}

// defaultMethod is dbt's method for a value that names none.
func defaultMethod(v string) string {
	l := strings.ToLower(v)
	switch {
	case strings.Contains(v, "/"):
		return "path"
	case strings.HasSuffix(l, ".sql") || strings.HasSuffix(l, ".py") || strings.HasSuffix(l, ".csv"):
		return "file"
	}
	return "fqn"
}

func digitsPrefix(s string) int {
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// wordPrefix is the length of the [\w.]* prefix of s.
func wordPrefix(s string) int {
	for i, r := range s {
		if r != '.' && r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r) {
			return i
		}
	}
	return len(s)
}

// depth reads a graph operator's depth: none is unbounded, and so is one past any
// graph (dbt's integers have no bound; a depth beyond the graph's size walks it all).
func depth(digits string) int {
	if digits == "" || len(digits) > 9 {
		return -1
	}
	n, _ := strconv.Atoi(digits)
	return n
}

func unionGraph(u [][]criterion) bool {
	for _, inter := range u {
		for _, c := range inter {
			if c.graph() {
				return true
			}
		}
	}
	return false
}

// NeedsManifest reports whether the selector uses graph operators.
func (s *Selector) NeedsManifest() bool { return unionGraph(s.include) || unionGraph(s.exclude) }

// Empty reports whether the selector selects every model.
func (s *Selector) Empty() bool { return s == nil || len(s.include) == 0 && len(s.exclude) == 0 }

// Selection is what a selector kept of a project's models and what it dropped: the
// counts, and the unique ids of at most SelectionListMax of each, in order.
type Selection struct {
	ModelsTotal   int      `json:"modelsTotal"`
	ModelsKept    int      `json:"modelsKept"`
	ModelsDropped int      `json:"modelsDropped"`
	Kept          []string `json:"kept"`
	Dropped       []string `json:"dropped"`
	// Truncated: a list holds fewer names than its count.
	Truncated bool `json:"truncated"`
}

// SelectionListMax is the most names each list of a Selection holds.
const SelectionListMax = 100

// Apply keeps in p only the models the selector selects and reports what it kept and
// dropped. A selector with graph operators needs p read from a manifest
// (ErrSelectorNeedsManifest); the graph walks stop at MaxSteps (*SelectorLimitError).
func (s *Selector) Apply(p *Project) (Selection, error) {
	sel := Selection{ModelsTotal: len(p.Models), Kept: []string{}, Dropped: []string{}}
	if s.NeedsManifest() && !p.FromManifest {
		return sel, ErrSelectorNeedsManifest
	}
	g := newSelectGraph(p)
	e := &evaluation{g: g, steps: s.limits.MaxSteps, max: s.limits.MaxSteps}
	var chosen bitset
	if s.include == nil {
		chosen = newBitset(len(g.nodes))
		chosen.fill(len(g.nodes))
	} else {
		var err error
		if chosen, err = e.union(s.include); err != nil {
			return sel, err
		}
	}
	if s.exclude != nil {
		out, err := e.union(s.exclude)
		if err != nil {
			return sel, err
		}
		chosen.andNot(out)
	}
	kept := p.Models[:0:0]
	for i, m := range p.Models {
		if chosen.has(i) { // models are the graph's first nodes, in order
			kept = append(kept, m)
			sel.ModelsKept++
			if len(sel.Kept) < SelectionListMax {
				sel.Kept = append(sel.Kept, listName(m.UniqueID))
			}
		} else {
			sel.ModelsDropped++
			if len(sel.Dropped) < SelectionListMax {
				sel.Dropped = append(sel.Dropped, listName(m.UniqueID))
			}
		}
	}
	sel.Truncated = sel.ModelsKept > len(sel.Kept) || sel.ModelsDropped > len(sel.Dropped)
	p.Models = kept
	return sel, nil
}

// listName is a model's unique id as a Selection lists it: at most 256 bytes (a hostile
// manifest's ids may be far longer), cut at a character.
func listName(id string) string {
	if len(id) <= 256 {
		return id
	}
	return strings.ToValidUTF8(id[:256], "") + "…"
}

// selectGraph is the project's nodes (its models first, in order, then the other nodes
// of the manifest but tests) with their dependency edges.
type selectGraph struct {
	nodes    []*NodeInfo
	parents  [][]int32
	children [][]int32
	project  string // the project's package, for package:this
}

func newSelectGraph(p *Project) *selectGraph {
	g := &selectGraph{project: p.ProjectName}
	index := make(map[string]int32, len(p.Models)+len(p.Others))
	ids := make([]string, 0, len(p.Models)+len(p.Others))
	add := func(id string, n *NodeInfo) {
		if _, dup := index[id]; !dup || id == "" {
			index[id] = int32(len(g.nodes))
		}
		g.nodes = append(g.nodes, n)
		ids = append(ids, id)
	}
	for _, m := range p.Models {
		info := m.Node
		if len(info.FQN) == 0 && m.Name != "" { // a project read or a manifest without fqn
			info.FQN = []string{m.Name}
		}
		info.versioned = m.Version != ""
		add(m.UniqueID, &info)
	}
	for i := range p.Others {
		add(p.Others[i].UniqueID, &p.Others[i].Node)
	}
	g.parents = make([][]int32, len(g.nodes))
	g.children = make([][]int32, len(g.nodes))
	for i, n := range g.nodes {
		for _, deploymentID := range n.DependsOn {
			j, ok := index[deploymentID]
			if !ok || int(j) == i {
				continue
			}
			g.parents[i] = append(g.parents[i], j)
			g.children[j] = append(g.children[j], int32(i))
		}
	}
	return g
}

// evaluation is one Apply's walks, on its step budget.
type evaluation struct {
	g          *selectGraph
	steps, max int
}

func (e *evaluation) union(u [][]criterion) (bitset, error) {
	out := newBitset(len(e.g.nodes))
	for _, inter := range u {
		var acc bitset
		for i, c := range inter {
			got, err := e.criterion(c)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				acc = got
			} else {
				acc.and(got)
			}
		}
		out.or(acc)
	}
	return out, nil
}

// criterion is the nodes one criterion selects: those its method matches, and the
// relatives its operators add (dbt's collect_specified_neighbors).
func (e *evaluation) criterion(c criterion) (bitset, error) {
	n := len(e.g.nodes)
	matched := newBitset(n)
	var seeds []int32
	for i, node := range e.g.nodes {
		if e.g.match(c, node) {
			matched.set(i)
			seeds = append(seeds, int32(i))
		}
	}
	out := matched.clone()
	if c.childrenAll {
		desc, err := e.walk(seeds, e.g.children, -1)
		if err != nil {
			return nil, err
		}
		// The descendants and the selected nodes, and every ancestor of them.
		from := desc.members()
		from = append(from, seeds...)
		anc, err := e.walk(from, e.g.parents, -1)
		if err != nil {
			return nil, err
		}
		out.or(desc)
		out.or(anc)
	}
	if c.parents {
		anc, err := e.walk(seeds, e.g.parents, c.parentsDepth)
		if err != nil {
			return nil, err
		}
		out.or(anc)
	}
	if c.children {
		desc, err := e.walk(seeds, e.g.children, c.childrenDepth)
		if err != nil {
			return nil, err
		}
		out.or(desc)
	}
	return out, nil
}

// walk is the nodes reachable from seeds along edges in at most depth steps (-1: any),
// seeds not included unless reached: a breadth-first walk layer by layer, each node
// visited once, each edge counted against the step budget.
func (e *evaluation) walk(seeds []int32, edges [][]int32, depth int) (bitset, error) {
	reached := newBitset(len(e.g.nodes))
	layer := seeds
	for d := 0; len(layer) > 0 && (depth < 0 || d < depth); d++ {
		var next []int32
		for _, v := range layer {
			e.steps -= len(edges[v])
			if e.steps < 0 {
				return nil, &SelectorLimitError{Value: e.max}
			}
			for _, w := range edges[v] {
				if !reached.has(int(w)) {
					reached.set(int(w))
					next = append(next, w)
				}
			}
		}
		layer = next
	}
	return reached, nil
}
