package convert

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// SupportedSchemaVersions are the manifest schema versions the conversion reads: v7 to v12
// (dbt 1.3 to 1.11) and v20, which dbt documents as identical to v12.
var SupportedSchemaVersions = map[int]bool{7: true, 8: true, 9: true, 10: true, 11: true, 12: true, 20: true}

var schemaVersionRE = regexp.MustCompile(`/manifest/v(\d+)\.json`)

// ParseSchemaVersion extracts the version number from metadata.dbt_schema_version, e.g.
// "https://schemas.getdbt.com/dbt/manifest/v12.json" is 12.
func ParseSchemaVersion(s string) (int, bool) {
	m := schemaVersionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	v, err := strconv.Atoi(m[1])
	return v, err == nil
}

// CheckSchemaVersion reports a readable error for an unsupported dbt_schema_version value.
func CheckSchemaVersion(raw string) (int, error) {
	v, ok := ParseSchemaVersion(raw)
	if !ok {
		return 0, fmt.Errorf("%w: %q is not a dbt manifest schema (supported: v7 to v12, v20)", ErrUnsupportedVersion, raw)
	}
	if !SupportedSchemaVersions[v] {
		return v, fmt.Errorf("%w: v%d (supported: v7 to v12, v20)", ErrUnsupportedVersion, v)
	}
	return v, nil
}

// DecodeManifest reads a manifest.json as a stream, one node at a time, keeping only what
// the data model needs: memory stays proportional to the models, not to the file (raw and
// compiled SQL, macros, docs and the rest are skipped without being held).
func DecodeManifest(r io.Reader) (*Project, error) { return DecodeManifestNotify(r, nil) }

// DecodeManifestNotify is DecodeManifest calling onModel (when not nil) with each model as
// soon as it is decoded, so a caller can prepare for its file while the rest streams in.
func DecodeManifestNotify(r io.Reader, onModel func(*Model)) (*Project, error) {
	dec := jsontext.NewDecoder(r, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	p := &Project{}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, notJSON(err)
	}
	if tok.Kind() != '{' {
		return nil, ErrNotManifest
	}
	sawNodes := false
	for dec.PeekKind() != '}' {
		key, err := readKey(dec)
		if err != nil {
			return nil, notJSON(err)
		}
		switch key {
		case "metadata":
			var md struct {
				Version string `json:"dbt_schema_version"`
				Adapter string `json:"adapter_type"`
			}
			if err := readInto(dec, &md); err != nil {
				return nil, err
			}
			p.Adapter = md.Adapter
			if md.Version != "" {
				v, err := CheckSchemaVersion(md.Version)
				if err != nil {
					return nil, err
				}
				p.SchemaVersion = v
			}
		case "nodes":
			if dec.PeekKind() != '{' {
				return nil, fmt.Errorf("%w: nodes is not an object", ErrNoNodes)
			}
			sawNodes = true
			if err := eachMember(dec, func(id string) error { return decodeNode(dec, id, p, onModel) }); err != nil {
				return nil, err
			}
		case "semantic_models":
			if err := eachMemberOrNull(dec, func(string) error {
				var sm rawSemanticModel
				if err := readInto(dec, &sm); err != nil {
					return err
				}
				p.SemanticModels = append(p.SemanticModels, sm.toSemanticModel())
				return nil
			}); err != nil {
				return nil, err
			}
		case "metrics":
			if err := eachMemberOrNull(dec, func(string) error {
				var m rawMetric
				if err := readInto(dec, &m); err != nil {
					return err
				}
				if m.Type != "" { // dbt < 1.6 metrics have another shape; they carry no MetricFlow type
					p.Metrics = append(p.Metrics, m.toMetric())
				}
				return nil
			}); err != nil {
				return nil, err
			}
		default:
			if err := dec.SkipValue(); err != nil {
				return nil, notJSON(err)
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, notJSON(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the manifest object", ErrNotJSON)
	}
	if !sawNodes {
		return nil, ErrNoNodes
	}
	return p, nil
}

func notJSON(err error) error {
	if errors.Is(err, ErrNotJSON) || errors.Is(err, ErrNoNodes) || errors.Is(err, ErrNotManifest) {
		return err
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: %v", ErrNotJSON, err)
}

// readKey reads an object member's name. Names of the dbt schema come from a fixed table
// rather than a fresh string each: a manifest has millions of them.
func readKey(dec *jsontext.Decoder) (string, error) {
	if dec.PeekKind() != '"' {
		if _, err := dec.ReadToken(); err != nil {
			return "", err
		}
		return "", fmt.Errorf("expected an object key")
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return "", err
	}
	name := []byte(raw[1 : len(raw)-1])
	if bytes.IndexByte(name, '\\') >= 0 {
		if name, err = jsontext.AppendUnquote(nil, raw); err != nil {
			return "", err
		}
	}
	if known, ok := schemaNames[string(name)]; ok {
		return known, nil
	}
	return string(name), nil
}

var schemaNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range strings.Fields(`metadata nodes sources macros docs exposures metrics groups selectors disabled
		parent_map child_map group_map saved_queries semantic_models unit_tests functions dbt_schema_version
		database schema name resource_type package_name path original_file_path unique_id fqn alias checksum
		config tags description columns meta group docs patch_path build_path unrendered_config created_at
		relation_name raw_code compiled_code language refs sources depends_on compiled_path compiled
		extra_ctes_injected extra_ctes contract access constraints version latest_version deprecation_date
		primary_key time_spine doc_blocks config_call_dict deferred data_type quote granularity column_name
		attached_node test_metadata file_key_name namespace kwargs enabled materialized model to field
		show node_color nodes macros persist_docs post-hook pre-hook quoting column_types full_refresh unique_key
		on_schema_change on_configuration_change grants packages incremental_strategy event_time batch_size
		lookback begin concurrent_batches severity store_failures store_failures_as warn_if error_if fail_calc
		where limit identifier enforced alias_types`) {
		m[n] = n
	}
	return m
}()

func readInto(dec *jsontext.Decoder, dst any) error {
	val, err := dec.ReadValue()
	if err != nil {
		return notJSON(err)
	}
	if err := json.Unmarshal(val, dst); err != nil {
		// A member of an unexpected shape is not a broken manifest: keep what decoded.
		return nil
	}
	return nil
}

// eachMember calls fn for every member of the object at the decoder's position; fn must
// consume the member's value.
func eachMember(dec *jsontext.Decoder, fn func(key string) error) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return notJSON(err)
	}
	if tok.Kind() != '{' {
		return fmt.Errorf("%w: expected an object", ErrNotJSON)
	}
	for dec.PeekKind() != '}' {
		key, err := readKey(dec)
		if err != nil {
			return notJSON(err)
		}
		if err := fn(key); err != nil {
			return err
		}
	}
	_, err = dec.ReadToken()
	return notJSON2(err)
}

func notJSON2(err error) error {
	if err == nil {
		return nil
	}
	return notJSON(err)
}

func eachMemberOrNull(dec *jsontext.Decoder, fn func(key string) error) error {
	if dec.PeekKind() != '{' {
		return notJSON2(dec.SkipValue())
	}
	return eachMember(dec, fn)
}

// decodeColumn reads one column token by token: a manifest has tens of thousands of
// columns, and decoding each through reflection was a quarter of the conversion's time.
// A text member of another type makes the column unreadable (the model becomes a warning).
func decodeColumn(dec *jsontext.Decoder) (c Column, problem string, err error) {
	if dec.PeekKind() != '{' {
		return c, "", notJSON2(dec.SkipValue())
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
			return notJSON2(dec.SkipValue())
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
				return notJSON2(dec.SkipValue())
			}
			return eachMember(dec, func(key string) error {
				switch key {
				case "meta":
					return readMeta(dec, &cmeta)
				case "tags":
					return readPrimaryKeyTag(dec, &c.PrimaryKey)
				}
				return notJSON2(dec.SkipValue())
			})
		default:
			return notJSON2(dec.SkipValue())
		}
	})
	c.Meta = mergeMeta(meta, cmeta)
	return c, problem, err
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case '0':
		return "number"
	}
	return "value"
}

// readMeta decodes a meta object; the common empty one costs no allocation.
func readMeta(dec *jsontext.Decoder, dst *map[string]any) error {
	if dec.PeekKind() == '{' {
		val, err := dec.ReadValue()
		if err != nil {
			return notJSON(err)
		}
		if len(bytes.TrimSpace(val[1:len(val)-1])) == 0 {
			return nil
		}
		if err := json.Unmarshal(val, dst); err != nil {
			*dst = nil // a meta of an unexpected shape is ignored, as a missing one
		}
		return nil
	}
	return notJSON2(dec.SkipValue())
}

// rawConstraint is a dbt model or column constraint (dbt 1.5+).
type rawConstraint struct {
	Type    string   `json:"type"`
	Columns []string `json:"columns"`
}

// readLenient decodes a value into dst, ignoring a value of another shape (as a missing one).
func readLenient(dec *jsontext.Decoder, dst any) error {
	val, err := dec.ReadValue()
	if err != nil {
		return notJSON(err)
	}
	_ = json.Unmarshal(val, dst)
	return nil
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

type rawTestMetadata struct {
	Name   string         `json:"name"`
	Kwargs map[string]any `json:"kwargs"`
}

func decodeNode(dec *jsontext.Decoder, id string, p *Project, onModel func(*Model)) error {
	if dec.PeekKind() != '{' {
		return notJSON2(dec.SkipValue())
	}
	var (
		resourceType string
		m            = &Model{UniqueID: id, Enabled: true}
		meta, cmeta  map[string]any
		columns      []Column
		testMeta     rawTestMetadata
		columnName   string
		attached     string
		refs         []string
		constraints  []rawConstraint
	)
	err := eachMember(dec, func(key string) error {
		switch key {
		case "resource_type":
			return readString(dec, &resourceType)
		case "name":
			return readString(dec, &m.Name)
		case "alias":
			return readString(dec, &m.Alias)
		case "relation_name":
			return readString(dec, &m.RelationName)
		case "constraints":
			if err := readLenient(dec, &constraints); err != nil {
				return err
			}
			return nil
		case "database":
			return readString(dec, &m.Database)
		case "schema":
			return readString(dec, &m.Schema)
		case "description":
			return readString(dec, &m.Description)
		case "column_name":
			return readString(dec, &columnName)
		case "attached_node":
			return readString(dec, &attached)
		case "meta":
			return readMeta(dec, &meta)
		case "primary_key":
			return readInto(dec, &m.PrimaryKey)
		case "test_metadata":
			return readInto(dec, &testMeta)
		case "refs":
			var raw []any
			if err := readInto(dec, &raw); err != nil {
				return err
			}
			for _, r := range raw {
				switch v := r.(type) {
				case []any: // dbt < 1.5: ["name"] or ["package", "name"]
					if len(v) > 0 {
						s, _ := v[len(v)-1].(string)
						refs = append(refs, s)
					}
				case map[string]any:
					s, _ := v["name"].(string)
					refs = append(refs, s)
				}
			}
			return nil
		case "config":
			var cfg struct {
				Materialized string         `json:"materialized"`
				Enabled      *bool          `json:"enabled"`
				Meta         map[string]any `json:"meta"`
			}
			if err := readInto(dec, &cfg); err != nil {
				return err
			}
			m.Materialized = cfg.Materialized
			if cfg.Enabled != nil {
				m.Enabled = *cfg.Enabled
			}
			cmeta = cfg.Meta
			return nil
		case "columns":
			if dec.PeekKind() != '{' {
				return notJSON2(dec.SkipValue())
			}
			return eachMember(dec, func(name string) error {
				c, problem, err := decodeColumn(dec)
				if err != nil {
					return err
				}
				if problem != "" {
					m.Err = fmt.Sprintf("column %q could not be read: %s", name, problem)
					return nil
				}
				if c.Name == "" {
					c.Name = name
				}
				columns = append(columns, c)
				return nil
			})
		default:
			return notJSON2(dec.SkipValue())
		}
	})
	if err != nil {
		return err
	}
	switch resourceType {
	case "model":
		for _, k := range constraints {
			if k.Type == "primary_key" {
				m.PrimaryKey = append(m.PrimaryKey, k.Columns...)
			}
		}
		m.Columns = columns
		m.Meta = mergeMeta(meta, cmeta)
		p.Models = append(p.Models, m)
		if onModel != nil {
			onModel(m)
		}
	case "test":
		if t, ok := toTest(testMeta, columnName, attached, refs); ok {
			p.Tests = append(p.Tests, t)
		}
	}
	return nil
}

func readString(dec *jsontext.Decoder, dst *string) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return notJSON(err)
	}
	switch tok.Kind() {
	case '"':
		*dst = tok.String()
	case '{', '[':
		// Not a string: skip the rest of the composite value.
		depth := 1
		for depth > 0 {
			t, err := dec.ReadToken()
			if err != nil {
				return notJSON(err)
			}
			switch t.Kind() {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
		}
	}
	return nil
}

var refRE = regexp.MustCompile(`ref\(\s*['"]([^'"]+)['"]\s*(?:,\s*['"]([^'"]+)['"]\s*)?\)`)

// RefName returns the model name of a Jinja ref('name') or ref('package', 'name').
func RefName(s string) string {
	m := refRE.FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	if m[2] != "" {
		return m[2]
	}
	return m[1]
}

func toTest(tm rawTestMetadata, columnName, attached string, refs []string) (Test, bool) {
	switch tm.Name {
	case "unique", "not_null", "relationships":
	default:
		return Test{}, false
	}
	t := Test{Kind: tm.Name, Column: columnName}
	if t.Column == "" {
		t.Column, _ = tm.Kwargs["column_name"].(string)
	}
	if attached != "" {
		t.Model = attached[strings.LastIndexByte(attached, '.')+1:]
	} else if model, ok := tm.Kwargs["model"].(string); ok {
		t.Model = RefName(model)
	}
	if t.Model == "" && len(refs) > 0 && tm.Name != "relationships" {
		t.Model = refs[0]
	}
	if tm.Name == "relationships" {
		to, _ := tm.Kwargs["to"].(string)
		t.ToModel = RefName(to)
		t.ToColumn, _ = tm.Kwargs["field"].(string)
	}
	if t.Model == "" || t.Column == "" {
		return Test{}, false
	}
	return t, true
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

type rawSemanticModel struct {
	Name     string `json:"name"`
	Model    string `json:"model"`
	Entities []struct {
		Name string `json:"name"`
		Type string `json:"type"`
		Expr string `json:"expr"`
	} `json:"entities"`
	Dimensions []struct {
		Name        string `json:"name"`
		Type        string `json:"type"`
		Expr        string `json:"expr"`
		Description string `json:"description"`
	} `json:"dimensions"`
	Measures []struct {
		Name        string `json:"name"`
		Agg         string `json:"agg"`
		Expr        any    `json:"expr"`
		Description string `json:"description"`
		Label       string `json:"label"`
		AggParams   *struct {
			Percentile float64 `json:"percentile"`
		} `json:"agg_params"`
	} `json:"measures"`
}

func (r rawSemanticModel) toSemanticModel() SemanticModel {
	sm := SemanticModel{Name: r.Name, Model: RefName(r.Model)}
	for _, e := range r.Entities {
		sm.Entities = append(sm.Entities, SMEntity{Name: e.Name, Type: e.Type, Expr: e.Expr})
	}
	for _, d := range r.Dimensions {
		sm.Dimensions = append(sm.Dimensions, SMDimension{Name: d.Name, Type: d.Type, Expr: d.Expr, Description: d.Description})
	}
	for _, m := range r.Measures {
		ms := SMMeasure{Name: m.Name, Agg: m.Agg, Description: m.Description, Label: m.Label}
		switch e := m.Expr.(type) {
		case string:
			ms.Expr = e
		case float64:
			ms.Expr = strconv.FormatFloat(e, 'f', -1, 64)
		}
		if m.AggParams != nil {
			ms.Percentile = m.AggParams.Percentile
		}
		sm.Measures = append(sm.Measures, ms)
	}
	return sm
}

type metricInput struct {
	Name string `json:"name"`
}

type rawMetric struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description"`
	Type        string `json:"type"`
	TypeParams  struct {
		Measure     *metricInput  `json:"measure"`
		Numerator   *metricInput  `json:"numerator"`
		Denominator *metricInput  `json:"denominator"`
		Expr        string        `json:"expr"`
		Metrics     []metricInput `json:"metrics"`
	} `json:"type_params"`
	Filter *struct {
		WhereFilters []struct {
			SQL string `json:"where_sql_template"`
		} `json:"where_filters"`
	} `json:"filter"`
}

func (r rawMetric) toMetric() Metric {
	m := Metric{Name: r.Name, Label: r.Label, Description: r.Description, Type: r.Type, Expr: r.TypeParams.Expr}
	if r.TypeParams.Measure != nil {
		m.Measure = r.TypeParams.Measure.Name
	}
	if r.TypeParams.Numerator != nil {
		m.Numerator = r.TypeParams.Numerator.Name
	}
	if r.TypeParams.Denominator != nil {
		m.Denominator = r.TypeParams.Denominator.Name
	}
	for _, in := range r.TypeParams.Metrics {
		m.Inputs = append(m.Inputs, in.Name)
	}
	if r.Filter != nil {
		for _, f := range r.Filter.WhereFilters {
			m.Filters = append(m.Filters, strings.TrimSpace(f.SQL))
		}
	}
	return m
}
