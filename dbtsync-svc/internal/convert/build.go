package convert

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// File is one generated data-model file.
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Warning is something skipped or coerced during a conversion, and why.
type Warning struct {
	Model   string `json:"model,omitempty"`
	Message string `json:"message"`
}

// CubePath is where the cube of that name is written.
func CubePath(cube string) string { return "model/cubes/" + cube + ".yml" }

// PathFor is where a model's cube is written, unless another model's cube takes the
// name first (then Prepare gives it a suffix).
func PathFor(m *Model) string {
	name, _ := memberName(m.Name)
	return CubePath(name)
}

type cube struct {
	Name        string
	Title       string // the model's name when Name had to differ from it
	SQLTable    string
	Description string
	Meta        map[string]any
	Dimensions  []*dimension
	Measures    []*measure
	Joins       []*join

	model   *Model
	dialect dialect
	names   namespace // member names taken (dimensions and measures share one namespace)
}

type dimension struct {
	Name        string
	Title       string // the column's name when Name had to differ from it
	SQL         string
	Type        string
	PrimaryKey  bool
	Description string
	Meta        map[string]any

	column string // the warehouse column it reads ("" for an expression)
}

type measure struct {
	Name        string
	SQL         string
	Type        string
	Title       string
	Description string
	Filters     []filter
}

type filter struct {
	SQL string
}

type join struct {
	Name         string
	SQL          string
	Relationship string
}

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

// Result is the outcome of a conversion.
type Result struct {
	Files    []File // sorted by path
	Warnings []Warning
}

// Build turns a project into data-model files. It is deterministic: the same project
// always gives byte-identical files in the same order, and a model's file depends only on
// that model, its tests and the semantic models and metrics that name it.
func Build(p *Project) Result {
	c := Prepare(p)
	res := Result{Files: make([]File, c.Len()), Warnings: c.Warnings}
	for i := range res.Files {
		res.Files[i] = c.File(i)
	}
	return res
}

// Conversion is a project whose cubes are decided (which models convert, their keys,
// joins and measures, every warning) but not yet rendered: File renders them one at a
// time, so a caller can write, count or release each as it goes.
type Conversion struct {
	Warnings []Warning
	cubes    []*cube // sorted by file path
}

// Len is the number of files the conversion generates.
func (c *Conversion) Len() int { return len(c.cubes) }

// File renders the i-th file (in path order) and releases that cube and its model, so a
// conversion rendered file by file holds little more than the files not yet written.
// Each index may be rendered once; different indexes may be rendered concurrently.
func (c *Conversion) File(i int) File {
	cb := c.cubes[i]
	c.cubes[i] = nil
	return File{Path: CubePath(cb.Name), Content: cb.render()}
}

// MayConvert reports whether m can become a file on its own merits; whether it does also
// depends on the other models (two models of one name make one file).
func MayConvert(m *Model) bool {
	return m.Err == "" && m.Name != "" && m.Enabled && m.Materialized != "ephemeral"
}

// Prepare decides the whole data model of a project; see Build.
func Prepare(p *Project) *Conversion {
	conv := &Conversion{}
	warn := func(model, format string, args ...any) {
		conv.Warnings = append(conv.Warnings, Warning{Model: model, Message: fmt.Sprintf(format, args...)})
	}
	models := append([]*Model(nil), p.Models...)
	sort.SliceStable(models, func(i, j int) bool {
		if models[i].Name != models[j].Name {
			return models[i].Name < models[j].Name
		}
		return models[i].UniqueID < models[j].UniqueID
	})
	d := dialectOf(p.Adapter)
	cubes := map[string]*cube{} // by model name
	cubeNames := namespace{}
	var order []string
	for _, m := range models {
		label := m.UniqueID
		if label == "" {
			label = m.Name
		}
		switch {
		case m.Err != "":
			warn(label, "model skipped: %s", m.Err)
			continue
		case m.Name == "":
			warn(label, "model skipped: it has no name")
			continue
		case !m.Enabled:
			warn(label, "model skipped: it is disabled")
			continue
		case m.Materialized == "ephemeral":
			warn(label, "model skipped: ephemeral models have no table to query")
			continue
		case cubes[m.Name] != nil:
			warn(label, "model skipped: another model is also named %q (%s)", m.Name, cubes[m.Name].model.UniqueID)
			continue
		}
		c := newCube(m, d, cubeNames, warn)
		if c == nil {
			continue
		}
		cubes[m.Name] = c
		order = append(order, m.Name)
	}
	applyTests(p.Tests, cubes, warn)
	measureCube := applySemanticModels(p.SemanticModels, cubes, warn)
	applyMetrics(p.Metrics, cubes, measureCube, warn)
	pruneJoins(order, cubes, warn)
	sort.Slice(order, func(i, j int) bool { return CubePath(cubes[order[i]].Name) < CubePath(cubes[order[j]].Name) })
	conv.cubes = make([]*cube, len(order))
	for i, name := range order {
		conv.cubes[i] = cubes[name]
	}
	return conv
}

func newCube(m *Model, d dialect, cubeNames namespace, warn func(model, format string, args ...any)) *cube {
	table := m.RelationName
	if table == "" {
		alias := m.Alias
		if alias == "" {
			alias = m.Name
		}
		table = relationOf(d, m.Database, m.Schema, alias)
	}
	if !sqlSafe(table) {
		warn(m.UniqueID, "model skipped: its relation %q has a brace or control character, which Cube's SQL cannot hold", table)
		return nil
	}
	name, renamed := memberName(m.Name)
	name = cubeNames.claim(name)
	c := &cube{Name: name, SQLTable: sqlEscape(table), Description: strings.TrimSpace(m.Description), Meta: m.Meta,
		model: m, dialect: d, names: namespace{}}
	if renamed || name != m.Name {
		c.Title = m.Name
	}
	c.Measures = []*measure{{Name: c.names.claim("count"), Type: "count"}}
	pk := map[string]bool{}
	for _, k := range m.PrimaryKey {
		pk[k] = true
	}
	for _, k := range metaStrings(m.Meta["primary_key"]) {
		pk[k] = true
	}
	for _, col := range m.Columns {
		if !sqlSafe(col.Name) || col.Name == "" {
			warn(m.UniqueID, "column %q skipped: a brace or control character cannot appear in Cube's SQL", col.Name)
			continue
		}
		if c.column(col.Name) != nil {
			continue
		}
		typ := ""
		if dm, ok := col.Meta["dimension"].(map[string]any); ok {
			if t, ok := dm["type"].(string); ok {
				typ, _ = dimensionType(t)
			}
		}
		if typ == "" {
			var known bool
			typ, known = dimensionType(col.DataType)
			if !known {
				warn(m.UniqueID, "column %q: unknown data type %q, typed as string", col.Name, col.DataType)
			}
		}
		isPK := pk[col.Name] || col.PrimaryKey
		if b, ok := col.Meta["primary_key"].(bool); ok && b {
			isPK = true
		}
		dim := c.addDimension(col.Name, c.columnSQL(col.Name, col.Quote), typ)
		dim.column, dim.PrimaryKey, dim.Description, dim.Meta = col.Name, isPK, strings.TrimSpace(col.Description), col.Meta
		for _, key := range []string{"metrics", "measures"} {
			defs, _ := col.Meta[key].(map[string]any)
			for _, mname := range sortedKeys(defs) {
				def, _ := defs[mname].(map[string]any)
				c.addMetaMeasure(mname, def, dim.SQL, warn)
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
	return c
}

// addDimension adds a dimension named after want (rewritten and made unique as needed,
// the original kept as its title).
func (c *cube) addDimension(want, sql, typ string) *dimension {
	name, renamed := memberName(want)
	name = c.names.claim(name)
	d := &dimension{Name: name, SQL: sql, Type: typ}
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
			return d.SQL
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
	for _, d := range c.Dimensions {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// pruneJoins drops the joins Cube refuses: it needs a primary key on both sides of a join
// (several primary_key dimensions are one composite key) to aggregate without fan-out.
func pruneJoins(order []string, cubes map[string]*cube, warn func(model, format string, args ...any)) {
	byName := map[string]*cube{}
	for _, name := range order {
		byName[cubes[name].Name] = cubes[name]
	}
	for _, name := range order {
		c := cubes[name]
		kept := c.Joins[:0]
		for _, j := range c.Joins {
			switch {
			case !c.hasKey():
				warn(c.model.UniqueID, "join to %q left out: cube %q has no primary key (a primary_key constraint, tag or meta, or unique and not_null tests)", j.Name, c.Name)
			case byName[j.Name] != nil && !byName[j.Name].hasKey():
				warn(c.model.UniqueID, "join to %q left out: that cube has no primary key", j.Name)
			default:
				kept = append(kept, j)
			}
		}
		c.Joins = kept
	}
}

func (c *cube) hasKey() bool {
	for _, d := range c.Dimensions {
		if d.PrimaryKey {
			return true
		}
	}
	return false
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
func (c *cube) addMeasure(m *measure, warn func(model, format string, args ...any)) bool {
	orig := m.Name
	name, renamed := memberName(orig)
	if c.measure(name) != nil {
		warn(c.model.UniqueID, "measure %q skipped: the cube already has a measure of that name", orig)
		return false
	}
	if c.names[name] {
		name += "_" + m.Type
		warn(c.model.UniqueID, "measure %q renamed %q: a dimension has that name", orig, name)
	}
	m.Name = c.names.claim(name)
	if (renamed || m.Name != orig) && m.Title == "" {
		m.Title = orig
	}
	c.Measures = append(c.Measures, m)
	return true
}

var measureTypes = map[string]string{
	"count": "count", "count_distinct": "count_distinct", "count_distinct_approx": "count_distinct_approx",
	"sum": "sum", "avg": "avg", "average": "avg", "min": "min", "max": "max", "number": "number",
}

// addMetaMeasure adds a measure declared in meta (`metrics:` or `measures:` of a column or
// a model): {type, sql, description, label}.
func (c *cube) addMetaMeasure(name string, def map[string]any, defaultSQL string, warn func(model, format string, args ...any)) {
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
		warn(c.model.UniqueID, "measure %q skipped: unsupported type %q", name, raw)
		return
	case sql == "" && typ != "count":
		warn(c.model.UniqueID, "measure %q skipped: a %s measure needs sql", name, typ)
		return
	}
	desc, _ := def["description"].(string)
	label, _ := def["label"].(string)
	c.addMeasure(&measure{Name: name, SQL: sql, Type: typ, Title: label, Description: strings.TrimSpace(desc)}, warn)
}

func applyTests(tests []Test, cubes map[string]*cube, warn func(model, format string, args ...any)) {
	type key struct{ model, column string }
	kinds := map[key]map[string]bool{}
	var rels []Test
	for _, t := range tests {
		k := key{t.Model, t.Column}
		if kinds[k] == nil {
			kinds[k] = map[string]bool{}
		}
		kinds[k][t.Kind] = true
		if t.Kind == "relationships" {
			rels = append(rels, t)
		}
	}
	for k, set := range kinds {
		if set["unique"] && set["not_null"] {
			if c := cubes[k.model]; c != nil {
				if d := c.dimension(k.column); d != nil {
					d.PrimaryKey = true
				}
			}
		}
	}
	sort.Slice(rels, func(i, j int) bool {
		a, b := rels[i], rels[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if a.ToModel != b.ToModel {
			return a.ToModel < b.ToModel
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.ToColumn < b.ToColumn
	})
	for _, t := range rels {
		c := cubes[t.Model]
		if c == nil {
			continue
		}
		if t.ToModel == "" || !sqlSafe(t.ToColumn) || !sqlSafe(t.Column) || t.ToColumn == "" || t.Column == "" {
			continue // a relationship to a source or of an unusual shape: no cube to join
		}
		to := cubes[t.ToModel]
		if to == nil {
			warn(c.model.UniqueID, "join to %q skipped: that model is not part of the data model", t.ToModel)
			continue
		}
		sql := joinSQL(c, to, t)
		if dup := c.join(to.Name); dup != nil {
			if dup.SQL != sql {
				warn(c.model.UniqueID, "join to %q on %s skipped: the cube already joins %q", t.ToModel, t.Column, t.ToModel)
			}
			continue
		}
		c.Joins = append(c.Joins, &join{Name: to.Name, SQL: sql, Relationship: "many_to_one"})
	}
}

// joinSQL joins the tested column of c to the referenced column of to, each quoted for
// the warehouse as that cube's dimension of the column is.
func joinSQL(c, to *cube, t Test) string {
	from := c.columnSQL(t.Column, false)
	if d := c.column(t.Column); d != nil {
		from = d.SQL
	}
	target := to.columnSQL(t.ToColumn, false)
	if d := to.column(t.ToColumn); d != nil {
		target = d.SQL
	}
	return from + " = {" + to.Name + "}" + strings.TrimPrefix(target, "{CUBE}")
}

func (c *cube) join(name string) *join {
	for _, j := range c.Joins {
		if j.Name == name {
			return j
		}
	}
	return nil
}

var metricFlowAgg = map[string]string{
	"sum": "sum", "count": "count", "count_distinct": "count_distinct", "min": "min", "max": "max", "average": "avg",
}

// applySemanticModels adds MetricFlow measures, dimensions and primary entities to the
// cubes of the models they name; it returns each measure's cube.
func applySemanticModels(sms []SemanticModel, cubes map[string]*cube, warn func(model, format string, args ...any)) map[string]memberRef {
	measureCube := map[string]memberRef{}
	sort.SliceStable(sms, func(i, j int) bool { return sms[i].Name < sms[j].Name })
	for _, sm := range sms {
		c := cubes[sm.Model]
		if c == nil {
			warn("semantic_model."+sm.Name, "semantic model skipped: model %q is not part of the data model", sm.Model)
			continue
		}
		for _, e := range sm.Entities {
			if e.Type != "primary" && e.Type != "unique" && e.Type != "natural" {
				continue
			}
			col := e.Expr
			if col == "" {
				col = e.Name
			}
			if d := c.dimension(col); d != nil {
				if e.Type == "primary" {
					d.PrimaryKey = true
				}
			} else if isIdent(col) {
				d := c.addDimension(col, c.columnSQL(col, false), "string")
				d.column, d.PrimaryKey = col, e.Type == "primary"
			}
		}
		for _, d := range sm.Dimensions {
			typ := "string"
			if d.Type == "time" {
				typ = "time"
			}
			if existing := c.dimension(d.Name); existing != nil {
				if typ == "time" {
					existing.Type = "time"
				}
				if existing.Description == "" {
					existing.Description = strings.TrimSpace(d.Description)
				}
				continue
			}
			if !sqlSafe(d.Expr) {
				warn(c.model.UniqueID, "dimension %q of semantic model %q skipped: its expression has a brace", d.Name, sm.Name)
				continue
			}
			if src := c.dimension(d.Expr); src != nil && typ == "string" {
				typ = src.Type
			}
			nd := c.addDimension(d.Name, c.exprSQL(d.Expr, d.Name), typ)
			nd.Description = strings.TrimSpace(d.Description)
		}
		for _, m := range sm.Measures {
			if !sqlSafe(m.Expr) {
				warn(c.model.UniqueID, "measure %q of semantic model %q skipped: its expression has a brace", m.Name, sm.Name)
				continue
			}
			sql := c.exprSQL(m.Expr, m.Name)
			typ, ok := metricFlowAgg[m.Agg]
			switch {
			case ok:
			case m.Agg == "sum_boolean":
				typ, sql = "sum", "CASE WHEN "+sql+" THEN 1 ELSE 0 END"
			case m.Agg == "median" || m.Agg == "percentile":
				p := m.Percentile
				if m.Agg == "median" || p == 0 {
					p = 0.5
				}
				typ, sql = "number", fmt.Sprintf("PERCENTILE_CONT(%g) WITHIN GROUP (ORDER BY %s)", p, sql)
			default:
				warn(c.model.UniqueID, "measure %q of semantic model %q skipped: unsupported aggregation %q", m.Name, sm.Name, m.Agg)
				continue
			}
			ms := &measure{Name: m.Name, SQL: sql, Type: typ, Title: m.Label, Description: strings.TrimSpace(m.Description)}
			if c.addMeasure(ms, warn) {
				measureCube[m.Name] = memberRef{c, ms.Name}
			}
		}
	}
	return measureCube
}

// memberRef names a measure of a cube.
type memberRef struct {
	cube *cube
	name string
}

var dimensionRefRE = regexp.MustCompile(`\{\{\s*Dimension\(\s*'([^']+)'\s*\)\s*\}\}`)

// applyMetrics turns MetricFlow metrics into cube measures: a simple metric becomes a
// measure over its input measure (with its filters), ratio and derived metrics become
// number measures over measures of one cube. Cumulative and conversion metrics, and those
// spanning cubes, have no single-cube equivalent and become warnings.
func applyMetrics(metrics []Metric, cubes map[string]*cube, measureCube map[string]memberRef, warn func(model, format string, args ...any)) {
	sort.SliceStable(metrics, func(i, j int) bool { return metrics[i].Name < metrics[j].Name })
	// A metric resolves to a measure of a cube: simple metrics first, then those built on them.
	resolved := map[string]memberRef{}
	for _, mt := range metrics {
		if mt.Type != "simple" {
			continue
		}
		ref, ok := measureCube[mt.Measure]
		if !ok {
			warn("metric."+mt.Name, "metric skipped: its measure %q is not in the data model", mt.Measure)
			continue
		}
		c := ref.cube
		base := c.measure(ref.name)
		if mt.Name == mt.Measure && len(mt.Filters) == 0 {
			if base.Title == "" {
				base.Title = mt.Label
			}
			if base.Description == "" {
				base.Description = strings.TrimSpace(mt.Description)
			}
			resolved[mt.Name] = ref
			continue
		}
		var filters []filter
		ok = true
		for _, f := range mt.Filters {
			sql, err := c.translateFilter(f)
			if err != nil {
				warn(c.model.UniqueID, "metric %q skipped: %v", mt.Name, err)
				ok = false
				break
			}
			filters = append(filters, filter{SQL: sql})
		}
		if !ok {
			continue
		}
		m := &measure{Name: mt.Name, SQL: base.SQL, Type: base.Type, Title: mt.Label, Description: strings.TrimSpace(mt.Description), Filters: filters}
		if c.addMeasure(m, warn) {
			resolved[mt.Name] = memberRef{c, m.Name}
		}
	}
	for _, mt := range metrics {
		var inputs []string
		var sql string
		switch mt.Type {
		case "simple":
			continue
		case "ratio":
			inputs = []string{mt.Numerator, mt.Denominator}
			sql = "1.0 * {" + resolved[mt.Numerator].name + "} / NULLIF({" + resolved[mt.Denominator].name + "}, 0)"
		case "derived":
			inputs = mt.Inputs
			sql = mt.Expr
			for _, in := range inputs {
				if r, ok := resolved[in]; ok {
					sql = regexp.MustCompile(`\b`+regexp.QuoteMeta(in)+`\b`).ReplaceAllString(sql, "{"+r.name+"}")
				}
			}
		default:
			warn("metric."+mt.Name, "metric skipped: %s metrics have no measure equivalent", mt.Type)
			continue
		}
		var c *cube
		ok := len(inputs) > 0
		for _, in := range inputs {
			ic := resolved[in].cube
			if ic == nil || (c != nil && ic != c) {
				ok = false
				break
			}
			c = ic
		}
		if !ok || (mt.Type == "derived" && !onlyRefs(sql, inputs)) {
			warn("metric."+mt.Name, "metric skipped: its inputs are not measures of a single cube")
			continue
		}
		c.addMeasure(&measure{Name: mt.Name, SQL: sql, Type: "number", Title: mt.Label, Description: strings.TrimSpace(mt.Description)}, warn)
	}
}

var bareWordRE = regexp.MustCompile(`\{[A-Za-z0-9_]+\}|[A-Za-z_][A-Za-z0-9_]*`)

// onlyRefs reports whether every identifier of a derived expression is a reference to one
// of its inputs (an alias or an offset input would be left dangling otherwise).
func onlyRefs(sql string, inputs []string) bool {
	for _, w := range bareWordRE.FindAllString(sql, -1) {
		if !strings.HasPrefix(w, "{") && !sqlKeyword[strings.ToLower(w)] {
			return false
		}
	}
	return true
}

var sqlKeyword = map[string]bool{"nullif": true, "coalesce": true, "case": true, "when": true, "then": true, "else": true, "end": true, "and": true, "or": true, "not": true, "null": true}

// translateFilter rewrites a MetricFlow where filter into cube SQL: each
// {{ Dimension('entity__name') }} becomes the SQL of that dimension of the cube.
func (c *cube) translateFilter(f string) (string, error) {
	var err error
	out := dimensionRefRE.ReplaceAllStringFunc(f, func(ref string) string {
		name := dimensionRefRE.FindStringSubmatch(ref)[1]
		if i := strings.LastIndex(name, "__"); i >= 0 {
			name = name[i+2:]
		}
		d := c.dimension(name)
		if d == nil {
			err = fmt.Errorf("filter dimension %q is not a dimension of cube %q", name, c.Name)
			return ref
		}
		return d.SQL
	})
	if err != nil {
		return "", err
	}
	if strings.Contains(out, "{{") {
		return "", fmt.Errorf("filter %q uses a template the data model cannot express", f)
	}
	return out, nil
}

var typeParamsRE = regexp.MustCompile(`\([^()]*\)`)

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
		t = strings.Join(strings.Fields(typeParamsRE.ReplaceAllString(t, " ")), " ")
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

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// render writes the cube as YAML. A small emitter rather than a YAML library: the shape is
// fixed, and a generic encoder costs most of a large conversion's time. Names are valid
// identifiers, written plain; every other string is double-quoted (Go quoting is valid
// YAML quoting), and free text goes through cubeText first.
func (c *cube) render() string {
	var b strings.Builder
	b.Grow(256 + 160*len(c.Dimensions) + 96*len(c.Measures))
	kv := func(indent, key, val string, quote bool) {
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
	text := func(indent, key, val string) {
		if val != "" {
			kv(indent, key, cubeText(val), true)
		}
	}
	meta := func(indent string, m map[string]any) {
		if len(m) > 0 {
			b.WriteString(indent)
			b.WriteString("meta: ")
			writeFlow(&b, m, 0)
			b.WriteByte('\n')
		}
	}
	b.WriteString("cubes:\n")
	kv("  - ", "name", c.Name, false)
	text("    ", "title", c.Title)
	kv("    ", "sql_table", c.SQLTable, true)
	text("    ", "description", c.Description)
	meta("    ", c.Meta)
	if len(c.Dimensions) > 0 {
		b.WriteString("    dimensions:\n")
		for _, d := range c.Dimensions {
			kv("      - ", "name", d.Name, false)
			text("        ", "title", d.Title)
			kv("        ", "sql", d.SQL, true)
			kv("        ", "type", d.Type, false)
			if d.PrimaryKey {
				kv("        ", "primary_key", "true", false)
			}
			text("        ", "description", d.Description)
			meta("        ", d.Meta)
		}
	}
	b.WriteString("    measures:\n")
	for _, m := range c.Measures {
		kv("      - ", "name", m.Name, false)
		if m.SQL != "" {
			kv("        ", "sql", m.SQL, true)
		}
		kv("        ", "type", m.Type, false)
		text("        ", "title", m.Title)
		text("        ", "description", m.Description)
		if len(m.Filters) > 0 {
			b.WriteString("        filters:\n")
			for _, f := range m.Filters {
				kv("          - ", "sql", f.SQL, true)
			}
		}
	}
	if len(c.Joins) > 0 {
		b.WriteString("    joins:\n")
		for _, j := range c.Joins {
			kv("      - ", "name", j.Name, false)
			kv("        ", "sql", j.SQL, true)
			kv("        ", "relationship", j.Relationship, false)
		}
	}
	return b.String()
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
