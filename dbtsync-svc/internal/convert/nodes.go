package convert

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// nodeParser reads manifest nodes member by member, by hand: a manifest has tens of
// thousands of columns, and decoding each through reflection was a quarter of the
// conversion's time. Strings go into an arena (one allocation per chunk, not per
// string). One nodeParser per goroutine.
type nodeParser struct {
	maxNames int // the scanner's names.max
	s        *scanner
	arena    []byte
	scratch  []byte
	columns  []Column // a node's columns as they are read; the model gets an exact copy
	sc       scanner  // the scanner of the member being read
	n        node     // the node being read
	// other is the last node parseNode read when it was neither a model nor a test:
	// what model selection reads of it (nil for a model or a test).
	other *GraphNode
}

// reset points the parser at the bytes of the next member.
func (np *nodeParser) reset(b []byte) *scanner {
	names := np.sc.names
	names.reset()
	names.max = np.maxNames
	np.sc = scanner{buf: b, mark: -1, names: names}
	np.s = &np.sc
	return np.s
}

// str is the value of the string at buf[start:end], as jsontext's Token.String gives it,
// copied into the arena.
func (np *nodeParser) str(start, end int, escaped, ascii bool) string {
	raw := np.s.buf[start+1 : end-1]
	switch {
	case escaped && len(raw) > 1024: // unescaped once, into the string's own bytes
		b, _ := jsontext.AppendUnquote(make([]byte, 0, len(raw)), np.s.buf[start:end])
		return unsafe.String(unsafe.SliceData(b), len(b))
	case escaped: // the scanner has validated it: no invalid UTF-8 to replace
		np.scratch, _ = jsontext.AppendUnquote(np.scratch[:0], np.s.buf[start:end])
		raw = np.scratch
	}
	if len(raw) == 0 {
		return ""
	}
	if len(raw) > 1024 {
		return string(raw)
	}
	if cap(np.arena)-len(np.arena) < len(raw) {
		np.arena = make([]byte, 0, 16<<10)
	}
	at := len(np.arena)
	np.arena = append(np.arena, raw...)
	// The arena's bytes are never written again once handed out: the string may share them.
	return unsafe.String(&np.arena[at], len(raw))
}

// text reads a string value into dst; a value of another type leaves dst as it is (an
// object or array is skipped).
func (np *nodeParser) text(dst *string) error {
	s := np.s
	if s.peek() != '"' {
		return s.skip()
	}
	start, end, escaped, ascii, err := s.str()
	if err == nil {
		*dst = np.str(start, end, escaped, ascii)
	}
	return err
}

// kindName names the JSON type of a value starting with c.
func kindName(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "number"
	}
	return "value"
}

// meta reads a meta object into m (merging, as json.Unmarshal into a map does); the
// common empty one costs no allocation, a value that is no object is ignored, as a
// missing one (nil).
func (np *nodeParser) meta(m map[string]any) (map[string]any, error) {
	s := np.s
	if s.peek() != '{' {
		return m, s.skip()
	}
	val, err := s.rawValue()
	if err != nil {
		return m, err
	}
	for _, c := range val[1 : len(val)-1] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return unmarshalMeta(val, m)
		}
	}
	return m, nil
}

// unmarshalMeta is json.Unmarshal of the object val into the map m (apart from meta:
// what escapes to the heap here is only allocated when used). The scanner has validated
// val as json.Unmarshal does, so an error is one neither expects.
func unmarshalMeta(val []byte, m map[string]any) (map[string]any, error) {
	if err := json.Unmarshal(val, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	return m, nil
}

// constraints reads constraints (json.Unmarshal); the common empty array costs nothing.
// A value of another shape is a problem that makes the model a warning (constraints
// that say nothing, null or not an array, read as missing).
func (np *nodeParser) constraints(dst []rawConstraint) (_ []rawConstraint, problem string, err error) {
	val, err := np.s.rawValue()
	if err != nil || string(val) == "[]" || val[0] != '[' {
		return dst, "", err
	}
	return unmarshalConstraints(val, dst)
}

func unmarshalConstraints(val []byte, dst []rawConstraint) ([]rawConstraint, string, error) {
	if err := json.Unmarshal(val, &dst); err != nil {
		return dst, "constraints could not be read: " + err.Error(), nil
	}
	return dst, "", nil
}

// rawConstraint is a dbt model or column constraint (dbt 1.5+).
type rawConstraint struct {
	Type    string   `json:"type"`
	Columns []string `json:"columns"`
}

// primaryKeyTag sets *pk when a tags value (a string or an array of strings) holds
// primary_key, the tag cube_dbt reads as a primary key.
func (np *nodeParser) primaryKeyTag(pk *bool) error {
	s := np.s
	is := func() error {
		if s.peek() != '"' {
			return s.skip()
		}
		start, end, escaped, ascii, err := s.str()
		if err == nil && s.text(start, end, escaped, ascii) == "primary_key" {
			*pk = true
		}
		return err
	}
	if s.peek() == '[' {
		return s.array(is)
	}
	return is()
}

// column reads one column. A text member of another type makes the column unreadable
// (the model becomes a warning).
func (np *nodeParser) column() (c Column, problem string, err error) {
	s := np.s
	if s.peek() != '{' {
		return c, "", s.skip()
	}
	var meta, cmeta map[string]any
	text := func(key string, dst *string) error {
		if k := s.peek(); k != '"' && k != 'n' && problem == "" {
			problem = fmt.Sprintf("%s is a JSON %s, not a string", key, kindName(k))
		}
		return np.text(dst)
	}
	err = s.object(func(key []byte) error {
		switch string(key) {
		case "name":
			return text("name", &c.Name)
		case "description":
			return text("description", &c.Description)
		case "data_type":
			return text("data_type", &c.DataType)
		case "meta":
			var err error
			meta, err = np.meta(meta)
			return err
		case "quote":
			c.Quote = c.Quote || s.peek() == 't'
			return s.skip()
		case "tags":
			return np.primaryKeyTag(&c.PrimaryKey)
		case "constraints":
			cs, bad, err := np.constraints(nil)
			for _, k := range cs {
				c.PrimaryKey = c.PrimaryKey || k.Type == "primary_key"
			}
			if bad != "" && problem == "" {
				problem = bad
			}
			return err
		case "config":
			if s.peek() != '{' {
				return s.skip()
			}
			return s.object(func(key []byte) error {
				switch string(key) {
				case "meta":
					var err error
					cmeta, err = np.meta(cmeta)
					return err
				case "tags":
					return np.primaryKeyTag(&c.PrimaryKey)
				}
				return s.skip()
			})
		}
		return s.skip()
	})
	c.Meta = mergeMeta(meta, cmeta)
	return c, problem, err
}

// rawTestMetadata is what a generic test's test_metadata says of its kind and arguments.
type rawTestMetadata struct {
	Name, ColumnName, Model, To, Field string
}

// node is one manifest node as it is read: a model's fields, or what a test needs.
type node struct {
	resourceType string
	m            *Model
	meta, cmeta  map[string]any
	columns      []Column
	testMeta     rawTestMetadata
	columnName   string
	attached     string
	refs         []Ref
	constraints  []rawConstraint
	tags         []string // tags and config.tags, as dbt merges them
}

// parseNode reads a node from np's scanner: a model, or a test the data model uses
// (isTest), or nothing.
func (np *nodeParser) parseNode() (m *Model, t Test, isTest bool, err error) {
	n := &np.n
	*n = node{m: &Model{Enabled: true}, columns: np.columns[:0], refs: n.refs[:0]}
	np.other = nil
	err = np.s.object(func(key []byte) error { return np.member(n, key) })
	np.columns = n.columns[:0]
	if err != nil {
		return nil, Test{}, false, err
	}
	n.m.Node.Tags = mergeTags(n.tags)
	switch n.resourceType {
	case "model":
		m := n.m
		for _, k := range n.constraints {
			if k.Type == "primary_key" {
				m.PrimaryKey = append(m.PrimaryKey, k.Columns...)
			}
		}
		if len(n.columns) > 0 {
			m.Columns = append(make([]Column, 0, len(n.columns)), n.columns...)
		}
		m.Meta = mergeMeta(n.meta, n.cmeta)
		return m, Test{}, false, nil
	case "test":
		t, ok := toTest(n.testMeta, n.columnName, n.attached, n.refs)
		return nil, t, ok, nil
	}
	if n.m.Enabled {
		np.other = &GraphNode{Node: n.m.Node}
	}
	return nil, Test{}, false, nil
}

// nodeReads is whether member reads a node's member name (the splitter hands on no
// other).
func nodeReads(name []byte) bool {
	switch string(name) {
	case "resource_type", "name", "alias", "relation_name", "constraints", "database", "schema", "description",
		"column_name", "attached_node", "meta", "primary_key", "test_metadata", "refs", "config", "columns",
		"version", "latest_version", "package_name", "fqn", "tags", "original_file_path", "patch_path", "depends_on":
		return true
	}
	return false
}

// member reads the value of the node's member key (one nodeReads names).
func (np *nodeParser) member(n *node, key []byte) error {
	s, m := np.s, n.m
	switch string(key) {
	case "resource_type":
		return np.resourceType(&n.resourceType)
	case "name":
		return np.text(&m.Name)
	case "alias":
		return np.text(&m.Alias)
	case "relation_name":
		return np.text(&m.RelationName)
	case "constraints":
		cs, problem, err := np.constraints(n.constraints)
		n.constraints = cs
		if problem != "" && m.Err == "" {
			m.Err = problem
		}
		return err
	case "database":
		return np.text(&m.Database)
	case "schema":
		return np.text(&m.Schema)
	case "description":
		return np.text(&m.Description)
	case "column_name":
		return np.text(&n.columnName)
	case "attached_node":
		return np.text(&n.attached)
	case "meta":
		var err error
		n.meta, err = np.meta(n.meta)
		return err
	case "primary_key":
		val, err := s.rawValue()
		if err == nil && val[0] == '[' {
			if err := json.Unmarshal(val, &m.PrimaryKey); err != nil && m.Err == "" {
				m.Err = "primary_key could not be read: " + err.Error()
			}
		}
		return err
	case "test_metadata":
		return np.testMetadata(&n.testMeta)
	case "refs":
		return np.refs(&n.refs)
	case "config":
		return np.config(n)
	case "columns":
		if s.peek() != '{' {
			return s.skip()
		}
		return s.object(func(name []byte) error { return np.addColumn(n, name) })
	case "version":
		return np.version(&m.Version)
	case "latest_version":
		return np.version(&m.Latest)
	case "package_name":
		return np.text(&m.Node.Package)
	case "original_file_path":
		return np.text(&m.Node.Path)
	case "patch_path":
		var pp string
		err := np.text(&pp)
		if _, rest, ok := strings.Cut(pp, "://"); ok { // "<project>://models/schema.yml"
			pp = rest
		}
		m.Node.PatchPath = pp
		return err
	case "fqn":
		m.Node.FQN = m.Node.FQN[:0]
		return np.strings(&m.Node.FQN)
	case "tags":
		return np.strings(&n.tags)
	case "depends_on":
		if s.peek() != '{' {
			return s.skip()
		}
		return s.object(func(key []byte) error {
			if string(key) == "nodes" {
				return np.strings(&m.Node.DependsOn)
			}
			return s.skip()
		})
	}
	return s.skip()
}

// strings appends the strings of an array value (or a lone string, as dbt accepts for
// tags) to dst; other values are skipped.
func (np *nodeParser) strings(dst *[]string) error {
	s := np.s
	one := func() error {
		var v string
		if err := np.text(&v); err != nil {
			return err
		}
		if v != "" {
			*dst = append(*dst, v)
		}
		return nil
	}
	switch s.peek() {
	case '[':
		return s.array(one)
	case '"':
		return one()
	}
	return s.skip()
}

// mergeTags is tags without repeats, in order.
func mergeTags(tags []string) []string {
	if len(tags) == 0 {
		return nil
	}
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// resourceType reads a node's resource_type; the two the data model uses cost no
// allocation.
func (np *nodeParser) resourceType(dst *string) error {
	s := np.s
	if s.peek() != '"' {
		return s.skip()
	}
	start, end, escaped, ascii, err := s.str()
	switch {
	case err != nil:
	case string(s.buf[start:end]) == `"model"`:
		*dst = "model"
	case string(s.buf[start:end]) == `"test"`:
		*dst = "test"
	default:
		*dst = s.text(start, end, escaped, ascii)
	}
	return err
}

// addColumn reads the column name of the node; a column that cannot be read makes the
// model a warning.
func (np *nodeParser) addColumn(n *node, name []byte) error {
	c, problem, err := np.column()
	if err != nil {
		return err
	}
	if problem != "" {
		n.m.Err = fmt.Sprintf("column %q could not be read: %s", name, problem)
		return nil
	}
	if c.Name == "" {
		c.Name = string(name)
	}
	n.columns = append(n.columns, c)
	return nil
}

// config reads what the data model needs of a node's config: each config (a manifest
// has one) sets the materialization and config.meta, absent ones included.
func (np *nodeParser) config(n *node) error {
	s := np.s
	n.m.Materialized, n.cmeta = "", nil
	if s.peek() != '{' {
		return s.skip()
	}
	return s.object(func(key []byte) error {
		switch string(key) {
		case "materialized":
			return np.text(&n.m.Materialized)
		case "enabled":
			switch s.peek() {
			case 't':
				n.m.Enabled = true
			case 'f':
				n.m.Enabled = false
			}
			return s.skip()
		case "meta":
			if s.peek() != '{' {
				return s.skip()
			}
			val, err := s.rawValue()
			if err == nil {
				n.cmeta, err = unmarshalMeta(val, nil)
			}
			return err
		case "tags":
			return np.strings(&n.tags)
		}
		return s.skip()
	})
}

// mergeMeta reads meta and config.meta, config.meta winning on the same key.
func mergeMeta(meta, configMeta map[string]any) map[string]any {
	if len(configMeta) == 0 {
		return meta
	}
	out := make(map[string]any, len(meta)+len(configMeta))
	for k, v := range meta {
		out[k] = v
	}
	for k, v := range configMeta {
		out[k] = v
	}
	return out
}
