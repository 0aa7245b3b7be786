package convert

import (
	"strings"
)

// cube is the data model of one dbt model as it will be written: its table, dimensions,
// measures and joins.
type cube struct {
	Name        string
	Title       string // the model's name when Name had to differ from it
	SQLTable    string
	Description string
	Meta        map[string]any
	Dimensions  []*dimension
	Measures    []*measure
	Joins       []*join

	modelID string      // the model's unique id (warnings name it)
	slab    []dimension // dimensions allocated ahead (newCube's, for its columns)
	key     string      // the model's key: its name, or <name>_v<N> for a version other than the latest
	dialect dialect
	names   *namespace // member names taken (dimensions and measures share one namespace); nil once the cube is built, until a name is claimed again
}

// dimension is a column of the model (or a semantic model's expression).
type dimension struct {
	Name        string
	Title       string // the column's name when Name had to differ from it
	SQL         string // "" for {CUBE}.<column>, the column bare (see sql)
	Type        string
	PrimaryKey  bool
	Description string
	Meta        map[string]any

	column string // the warehouse column it reads ("" for an expression)
}

// measure is an aggregation of the cube: count, meta metrics, MetricFlow measures and
// metrics.
type measure struct {
	Name          string
	SQL           string
	Type          string
	Title         string
	Description   string
	Filters       []filter
	RollingWindow *rollingWindow
	MultiStage    bool
	TimeShift     *timeShift
	Hidden        bool // public: false, a step of a metric rather than a metric
	Meta          map[string]any

	aggTime    string      // the time dimension MetricFlow aggregates it by ("" when unknown)
	percentile *percentile // a percentile's parts, so that a filter can narrow it
}

// rollingWindow is a cumulative measure's window: trailing (an interval or unbounded),
// or to_date of a granularity.
type rollingWindow struct {
	Trailing    string
	Type        string
	Granularity string
}

// timeShift shifts a multi-stage measure's time dimension back by an interval.
type timeShift struct {
	Interval      string
	TimeDimension string
}

// percentile is a percentile measure's parts: PERCENTILE_CONT or _DISC of a fraction,
// ordered by an expression.
type percentile struct {
	fraction float64
	discrete bool
	expr     string
}

// filter is a measure's SQL condition.
type filter struct {
	SQL string
}

// join is a many_to_one join to another cube, from a relationships test.
type join struct {
	Name         string
	SQL          string
	Relationship string
}

// relation is the table a model's cube reads: dbt's relation_name, else database, schema
// and alias quoted as the adapter would; ok is false when Cube's SQL cannot hold it.
func relation(m *Model, d dialect) (table string, ok bool) {
	table = m.RelationName
	if table == "" {
		alias := m.Alias
		if alias == "" {
			alias = m.Name
		}
		table = relationOf(d, m.Database, m.Schema, alias)
	}
	return table, sqlSafe(table)
}

// typeCache remembers dimensionType's answers: a manifest repeats a few data types over
// thousands of columns. One per goroutine.
type typeCache map[string]typeAnswer

type typeAnswer struct {
	typ   string
	known bool
}

func (tc typeCache) dimensionType(dataType string) (string, bool) {
	if a, ok := tc[dataType]; ok {
		return a.typ, a.known
	}
	typ, known := dimensionType(dataType)
	if len(tc) < 4096 {
		tc[dataType] = typeAnswer{typ, known}
	}
	return typ, known
}

// newCube is the cube named name of model m (known to the project as key), reading table.
func newCube(m *Model, key, name, table string, d dialect, types typeCache, warn warnFunc) *cube {
	c := &cube{Name: name, SQLTable: sqlEscape(table), Description: strings.TrimSpace(m.Description), Meta: m.Meta,
		modelID: m.UniqueID, key: key, dialect: d}
	if renamed := name != key; renamed {
		c.Title = key
	}
	c.Measures = []*measure{{Name: c.ns().claim("count"), Type: "count"}}
	pk := map[string]bool{}
	for _, k := range m.PrimaryKey {
		pk[k] = true
	}
	for _, k := range metaStrings(m.Meta["primary_key"]) {
		pk[k] = true
	}
	c.slab = make([]dimension, len(m.Columns))
	c.Dimensions = make([]*dimension, 0, len(m.Columns))
	var columns namespace
	for _, col := range m.Columns {
		if !sqlSafe(col.Name) || col.Name == "" {
			warn(m.UniqueID, "column %q skipped: a brace or control character cannot appear in Cube's SQL", col.Name)
			continue
		}
		if columns.has(col.Name) {
			continue
		}
		columns.add(col.Name)
		typ := ""
		if dm, ok := col.Meta["dimension"].(map[string]any); ok {
			if t, ok := dm["type"].(string); ok {
				typ, _ = types.dimensionType(t)
			}
		}
		if typ == "" {
			var known bool
			typ, known = types.dimensionType(col.DataType)
			if !known {
				warn(m.UniqueID, "column %q: unknown data type %q, typed as string", col.Name, col.DataType)
			}
		}
		isPK := pk[col.Name] || col.PrimaryKey
		if b, ok := col.Meta["primary_key"].(bool); ok && b {
			isPK = true
		}
		dim := c.columnDimension(col.Name, col.Quote, typ)
		dim.PrimaryKey, dim.Description, dim.Meta = isPK, strings.TrimSpace(col.Description), col.Meta
		for _, key := range []string{"metrics", "measures"} {
			defs, _ := col.Meta[key].(map[string]any)
			for _, mname := range sortedKeys(defs) {
				def, _ := defs[mname].(map[string]any)
				c.addMetaMeasure(mname, def, dim.sql(), warn)
			}
		}
	}
	for _, key := range []string{"metrics", "measures"} {
		defs, _ := m.Meta[key].(map[string]any)
		for _, mname := range sortedKeys(defs) {
			def, _ := defs[mname].(map[string]any)
			c.addMetaMeasure(mname, def, "", warn)
		}
	}
	c.names, c.slab = nil, nil
	return c
}

// sql is the dimension's SQL. A column that needs no quoting is {CUBE}.<column>, made
// when asked rather than held for each of a manifest's hundred thousand columns.
func (d *dimension) sql() string {
	if d.SQL == "" {
		return "{CUBE}." + d.column
	}
	return d.SQL
}

// columnDimension adds the dimension of the column col, its SQL quoted for the
// warehouse when the bare name would not reach it (see columnSQL).
func (c *cube) columnDimension(col string, force bool, typ string) *dimension {
	sql := ""
	if q := quoteIdent(c.dialect, col, force); q != col {
		sql = "{CUBE}." + sqlEscape(q)
	}
	d := c.addDimension(col, sql, typ)
	d.column = col
	return d
}

// addDimension adds a dimension named after want (rewritten and made unique as needed,
// the original kept as its title).
func (c *cube) addDimension(want, sql, typ string) *dimension {
	name, renamed := memberName(want)
	name = c.ns().claim(name)
	var d *dimension
	if len(c.slab) > 0 { // newCube's columns come from one allocation
		d, c.slab = &c.slab[0], c.slab[1:]
		*d = dimension{Name: name, SQL: sql, Type: typ}
	} else {
		d = &dimension{Name: name, SQL: sql, Type: typ}
	}
	if renamed || name != want {
		d.Title = want
	}
	c.Dimensions = append(c.Dimensions, d)
	return d
}

// columnSQL is the SQL of a column of the cube's table, quoted for the warehouse whenever
// the bare name would not reach it.
func (c *cube) columnSQL(col string, force bool) string {
	return "{CUBE}." + sqlEscape(quoteIdent(c.dialect, col, force))
}

// exprSQL is a MetricFlow expr as cube SQL: a bare column is quoted like any column,
// anything else is the author's SQL.
func (c *cube) exprSQL(expr, fallback string) string {
	if expr == "" {
		expr = fallback
	}
	if isIdent(expr) {
		if d := c.column(expr); d != nil {
			return d.sql()
		}
		return c.columnSQL(expr, false)
	}
	return expr
}

// column is the dimension reading the warehouse column col.
func (c *cube) column(col string) *dimension {
	for _, d := range c.Dimensions {
		if d.column == col {
			return d
		}
	}
	return nil
}

// dimension finds a dimension by the warehouse column it reads, else by its member name.
func (c *cube) dimension(name string) *dimension {
	if d := c.column(name); d != nil {
		return d
	}
	return c.member(name)
}

func (c *cube) measure(name string) *measure {
	for _, m := range c.Measures {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// addMeasure adds m unless the name is taken or invalid. Dimensions and measures share
// one namespace in a cube, so a measure named like a dimension gets its type as a suffix.
// A name that is not a valid or free Cube identifier is rewritten (memberName), the
// original kept as the title.
func (c *cube) addMeasure(m *measure, warn warnFunc) bool {
	orig := m.Name
	name, renamed := memberName(orig)
	if c.measure(name) != nil {
		warn(c.modelID, "measure %q skipped: the cube already has a measure of that name", orig)
		return false
	}
	if c.ns().has(name) {
		name += "_" + m.Type
		warn(c.modelID, "measure %q renamed %q: a dimension has that name", orig, name)
	}
	m.Name = c.ns().claim(name)
	if (renamed || m.Name != orig) && m.Title == "" {
		m.Title = orig
	}
	c.Measures = append(c.Measures, m)
	return true
}

// ns is the cube's namespace, rebuilt from its members when it was let go (newCube
// lets it go: most cubes never take another name, and a manifest has thousands).
func (c *cube) ns() *namespace {
	if c.names == nil {
		c.names = &namespace{}
		for _, d := range c.Dimensions {
			c.names.add(d.Name)
		}
		for _, m := range c.Measures {
			c.names.add(m.Name)
		}
	}
	return c.names
}

// renameMeasure gives m another name (made unique in the cube).
func (c *cube) renameMeasure(m *measure, want string) {
	c.ns().release(m.Name)
	name, _ := memberName(want)
	m.Name = c.ns().claim(name)
}

// addHelper adds a measure that is a step of a metric, under a name made unique in the
// cube.
func (c *cube) addHelper(m *measure) {
	name, _ := memberName(m.Name)
	m.Name = c.ns().claim(name)
	c.Measures = append(c.Measures, m)
}

var measureTypes = map[string]string{
	"count": "count", "count_distinct": "count_distinct", "count_distinct_approx": "count_distinct_approx",
	"sum": "sum", "avg": "avg", "average": "avg", "min": "min", "max": "max", "number": "number",
}

// addMetaMeasure adds a measure declared in meta (`metrics:` or `measures:` of a column or
// a model): {type, sql, description, label}.
func (c *cube) addMetaMeasure(name string, def map[string]any, defaultSQL string, warn warnFunc) {
	raw, _ := def["type"].(string)
	typ, ok := measureTypes[strings.ToLower(raw)]
	sql, _ := def["sql"].(string)
	if sql == "" {
		sql = defaultSQL
	}
	switch {
	case strings.ToLower(raw) == "median" && sql != "":
		typ, ok = "number", true
		sql = "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY " + sql + ")"
	case !ok:
		warn(c.modelID, "measure %q skipped: unsupported type %q", name, raw)
		return
	case sql == "" && typ != "count":
		warn(c.modelID, "measure %q skipped: a %s measure needs sql", name, typ)
		return
	}
	desc, _ := def["description"].(string)
	label, _ := def["label"].(string)
	c.addMeasure(&measure{Name: name, SQL: sql, Type: typ, Title: label, Description: strings.TrimSpace(desc)}, warn)
}

// stripParams replaces each innermost parenthesized group of t with a space, in one
// pass, left to right (the regular expression \([^()]*\) replaced everywhere).
func stripParams(t string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(t); i++ {
		if t[i] != '(' {
			continue
		}
		j := strings.IndexAny(t[i+1:], "()")
		if j < 0 || t[i+1+j] != ')' {
			continue
		}
		b.WriteString(t[last:i])
		b.WriteByte(' ')
		last = i + 1 + j + 1
		i = last - 1
	}
	b.WriteString(t[last:])
	return b.String()
}

// dimensionType maps a warehouse data type to a dimension type; an empty type is string
// (dbt without column types), an unrecognized one is string and not known. Parameters and
// nesting go first: NUMBER(38,0) is number, TIMESTAMP(6) WITH TIME ZONE is time,
// STRUCT<…>, ARRAY<…>, MAP<…> and INT[] are string.
func dimensionType(dataType string) (string, bool) {
	t := strings.ToLower(strings.TrimSpace(dataType))
	if i := strings.IndexByte(t, '<'); i >= 0 {
		t = t[:i]
	}
	if strings.HasSuffix(t, "]") {
		return "string", true // an array (Postgres int[], DuckDB VARCHAR[])
	}
	if strings.IndexByte(t, '(') >= 0 {
		t = strings.Join(strings.Fields(stripParams(t)), " ")
	}
	switch t {
	case "struct", "record", "map", "list", "array", "geography", "geometry", "interval", "variant", "object", "super",
		"json", "jsonb", "xml", "blob", "bytea", "bit", "varbit", "hllsketch", "range", "union", "tsvector", "inet", "cidr", "macaddr":
		return "string", true
	case "utinyint", "usmallint", "uinteger", "ubigint", "uhugeint", "serial", "bigserial", "smallserial", "long", "short", "byte":
		return "number", true
	case "timestamp_s", "timestamp_ms", "timestamp_ns", "timestamp_us", "timestamp with local time zone", "datetimeoffset", "timetz":
		return "time", true
	}
	switch t {
	case "", "string":
		return "string", true
	case "number", "numeric", "decimal", "dec", "int", "integer", "int2", "int4", "int8", "int16", "int32", "int64", "int128",
		"smallint", "bigint", "tinyint", "byteint", "hugeint", "float", "float4", "float8", "float32", "float64", "double",
		"double precision", "real", "bignumeric", "money", "uint8", "uint16", "uint32", "uint64":
		return "number", true
	case "bool", "boolean":
		return "boolean", true
	case "date", "datetime", "datetime64", "time", "timestamp", "timestamptz", "timestamp_tz", "timestamp_ltz", "timestamp_ntz",
		"timestamp with time zone", "timestamp without time zone", "time with time zone", "time without time zone", "datetime2", "smalldatetime":
		return "time", true
	case "varchar", "char", "character", "character varying", "text", "nvarchar", "nchar", "ntext", "bpchar", "citext",
		"uuid", "json", "jsonb", "variant", "object", "array", "super", "enum", "lowcardinality", "fixedstring", "bytes", "binary", "varbinary":
		return "string", true
	}
	if strings.HasPrefix(t, "timestamp") {
		return "time", true
	}
	return "string", false
}

func metaStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
