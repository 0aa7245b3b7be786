package convert

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// decodeColumn reads one column token by token: a manifest has tens of thousands of
// columns, and decoding each through reflection was a quarter of the conversion's time.
// A text member of another type makes the column unreadable (the model becomes a warning).
func decodeColumn(dec *jsontext.Decoder) (c Column, problem string, err error) {
	if dec.PeekKind() != '{' {
		return c, "", notJSON(dec.SkipValue())
	}
	var meta, cmeta map[string]any
	text := func(key string, dst *string) error {
		if k := dec.PeekKind(); k != '"' && k != 'n' && problem == "" {
			problem = fmt.Sprintf("%s is a JSON %s, not a string", key, kindName(k))
		}
		return readString(dec, dst)
	}
	err = eachMember(dec, func(key string) error {
		switch key {
		case "name":
			return text(key, &c.Name)
		case "description":
			return text(key, &c.Description)
		case "data_type":
			return text(key, &c.DataType)
		case "meta":
			return readMeta(dec, &meta)
		case "quote":
			if dec.PeekKind() == 't' {
				c.Quote = true
			}
			return notJSON(dec.SkipValue())
		case "tags":
			return readPrimaryKeyTag(dec, &c.PrimaryKey)
		case "constraints":
			var cs []rawConstraint
			if err := readLenient(dec, &cs); err != nil {
				return err
			}
			for _, k := range cs {
				c.PrimaryKey = c.PrimaryKey || k.Type == "primary_key"
			}
			return nil
		case "config":
			if dec.PeekKind() != '{' {
				return notJSON(dec.SkipValue())
			}
			return eachMember(dec, func(key string) error {
				switch key {
				case "meta":
					return readMeta(dec, &cmeta)
				case "tags":
					return readPrimaryKeyTag(dec, &c.PrimaryKey)
				}
				return notJSON(dec.SkipValue())
			})
		default:
			return notJSON(dec.SkipValue())
		}
	})
	c.Meta = mergeMeta(meta, cmeta)
	return c, problem, err
}

// rawConstraint is a dbt model or column constraint (dbt 1.5+).
type rawConstraint struct {
	Type    string   `json:"type"`
	Columns []string `json:"columns"`
}

// readPrimaryKeyTag sets *pk when a tags value (a string or an array of strings) holds
// primary_key, the tag cube_dbt reads as a primary key.
func readPrimaryKeyTag(dec *jsontext.Decoder, pk *bool) error {
	var tags any
	if err := readLenient(dec, &tags); err != nil {
		return err
	}
	for _, t := range metaStrings(tags) {
		if t == "primary_key" {
			*pk = true
		}
	}
	return nil
}

// rawTestMetadata is a generic test's name and arguments.
type rawTestMetadata struct {
	Name   string         `json:"name"`
	Kwargs map[string]any `json:"kwargs"`
}

// node is one manifest node as it is read: a model's fields, or what a test needs.
type node struct {
	dec          *jsontext.Decoder
	resourceType string
	m            *Model
	meta, cmeta  map[string]any
	columns      []Column
	testMeta     rawTestMetadata
	columnName   string
	attached     string
	refs         []Ref
	constraints  []rawConstraint
}

// decodeNode reads the node id and adds it to p when it is a model or a test the data
// model uses; onModel (when not nil) is called with each model read.
func decodeNode(dec *jsontext.Decoder, id string, p *Project, onModel func(*Model)) error {
	if dec.PeekKind() != '{' {
		return notJSON(dec.SkipValue())
	}
	n := &node{dec: dec, m: &Model{UniqueID: id, Enabled: true}}
	if err := eachMember(dec, n.member); err != nil {
		return err
	}
	switch n.resourceType {
	case "model":
		m := n.m
		for _, k := range n.constraints {
			if k.Type == "primary_key" {
				m.PrimaryKey = append(m.PrimaryKey, k.Columns...)
			}
		}
		m.Columns = n.columns
		m.Meta = mergeMeta(n.meta, n.cmeta)
		p.Models = append(p.Models, m)
		if onModel != nil {
			onModel(m)
		}
	case "test":
		if t, ok := toTest(n.testMeta, n.columnName, n.attached, n.refs); ok {
			p.Tests = append(p.Tests, t)
		}
	}
	return nil
}

// member reads the value of the node's member key.
func (n *node) member(key string) error {
	dec, m := n.dec, n.m
	switch key {
	case "resource_type":
		return readString(dec, &n.resourceType)
	case "name":
		return readString(dec, &m.Name)
	case "alias":
		return readString(dec, &m.Alias)
	case "relation_name":
		return readString(dec, &m.RelationName)
	case "constraints":
		return readLenient(dec, &n.constraints)
	case "database":
		return readString(dec, &m.Database)
	case "schema":
		return readString(dec, &m.Schema)
	case "description":
		return readString(dec, &m.Description)
	case "column_name":
		return readString(dec, &n.columnName)
	case "attached_node":
		return readString(dec, &n.attached)
	case "meta":
		return readMeta(dec, &n.meta)
	case "primary_key":
		return readInto(dec, &m.PrimaryKey)
	case "test_metadata":
		return readInto(dec, &n.testMeta)
	case "refs":
		return n.readRefs()
	case "version":
		return readVersion(dec, &m.Version)
	case "latest_version":
		return readVersion(dec, &m.Latest)
	case "config":
		return n.readConfig()
	case "columns":
		return eachMemberOrNull(dec, n.readColumn)
	}
	return notJSON(dec.SkipValue())
}

// readRefs reads the models a node refers to, in either of dbt's shapes.
func (n *node) readRefs() error {
	var raw []any
	if err := readInto(n.dec, &raw); err != nil {
		return err
	}
	for _, r := range raw {
		switch v := r.(type) {
		case []any: // dbt < 1.5: ["name"] or ["package", "name"]
			if len(v) > 0 {
				s, _ := v[len(v)-1].(string)
				n.refs = append(n.refs, Ref{Name: s})
			}
		case map[string]any: // dbt 1.5+: {name, package, version}
			s, _ := v["name"].(string)
			n.refs = append(n.refs, Ref{Name: s, Version: versionOf(v["version"])})
		}
	}
	return nil
}

// versionOf reads a model version of any JSON shape dbt writes (a number or a string).
func versionOf(v any) string {
	switch x := v.(type) {
	case string:
		return normVersion(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

// readVersion reads a node's version or latest_version.
func readVersion(dec *jsontext.Decoder, dst *string) error {
	val, err := dec.ReadValue()
	if err != nil {
		return notJSON(err)
	}
	switch val.Kind() {
	case '0':
		*dst = normVersion(string(val))
	case '"':
		var s string
		if json.Unmarshal(val, &s) == nil {
			*dst = normVersion(s)
		}
	}
	return nil
}

// readConfig reads what the data model needs of a node's config.
func (n *node) readConfig() error {
	var cfg struct {
		Materialized string         `json:"materialized"`
		Enabled      *bool          `json:"enabled"`
		Meta         map[string]any `json:"meta"`
	}
	if err := readInto(n.dec, &cfg); err != nil {
		return err
	}
	n.m.Materialized = cfg.Materialized
	if cfg.Enabled != nil {
		n.m.Enabled = *cfg.Enabled
	}
	n.cmeta = cfg.Meta
	return nil
}

// readColumn reads the column name of the node; a column that cannot be read makes the
// model a warning.
func (n *node) readColumn(name string) error {
	c, problem, err := decodeColumn(n.dec)
	if err != nil {
		return err
	}
	if problem != "" {
		n.m.Err = fmt.Sprintf("column %q could not be read: %s", name, problem)
		return nil
	}
	if c.Name == "" {
		c.Name = name
	}
	n.columns = append(n.columns, c)
	return nil
}

func toTest(tm rawTestMetadata, columnName, attached string, refs []Ref) (Test, bool) {
	switch tm.Name {
	case "unique", "not_null", "relationships":
	default:
		return Test{}, false
	}
	t := Test{Kind: tm.Name, Column: columnName, ModelID: attached}
	if t.Column == "" {
		t.Column, _ = tm.Kwargs["column_name"].(string)
	}
	if attached != "" {
		t.Model = refOfID(attached)
	} else if model, ok := tm.Kwargs["model"].(string); ok {
		t.Model = ParseRef(model)
	}
	if t.Model.Name == "" && len(refs) > 0 && tm.Name != "relationships" {
		t.Model = refs[0]
	}
	if tm.Name == "relationships" {
		to, _ := tm.Kwargs["to"].(string)
		t.ToModel = ParseRef(to)
		t.ToColumn, _ = tm.Kwargs["field"].(string)
	}
	if t.Model.Name == "" || t.Column == "" {
		return Test{}, false
	}
	return t, true
}

// refOfID reads the model a unique id names: model.<package>.<name>, or
// model.<package>.<name>.v<version> for a model version.
func refOfID(id string) Ref {
	parts := strings.SplitN(id, ".", 4)
	if len(parts) >= 3 && parts[0] == "model" {
		r := Ref{Name: parts[2]}
		if len(parts) == 4 && strings.HasPrefix(parts[3], "v") {
			r.Version = normVersion(parts[3][1:])
		}
		return r
	}
	return Ref{Name: id[strings.LastIndexByte(id, '.')+1:]}
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
