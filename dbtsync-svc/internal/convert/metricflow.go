package convert

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// metricFlowAgg maps MetricFlow aggregations to Cube measure types.
var metricFlowAgg = map[string]string{
	"sum": "sum", "count": "count", "count_distinct": "count_distinct", "min": "min", "max": "max", "average": "avg",
}

// applySemanticModels adds MetricFlow measures, dimensions and primary entities to the
// cubes of the models they name; it returns each measure's cube.
func applySemanticModels(sms []SemanticModel, cubes map[string]*cube, warn warnFunc) map[string]memberRef {
	measureCube := map[string]memberRef{}
	sort.SliceStable(sms, func(i, j int) bool { return sms[i].Name < sms[j].Name })
	for _, sm := range sms {
		c := cubes[sm.Model]
		if c == nil {
			warn("semantic_model."+sm.Name, "semantic model skipped: model %q is not part of the data model", sm.Model)
			continue
		}
		c.addEntities(sm)
		c.addSemanticDimensions(sm, warn)
		for _, m := range sm.Measures {
			if ms := c.addSemanticMeasure(sm, m, warn); ms != nil {
				measureCube[m.Name] = memberRef{c, ms.Name}
			}
		}
	}
	return measureCube
}

// addEntities marks the columns of the semantic model's primary entity as the cube's
// key (adding a dimension for a column the model did not document).
func (c *cube) addEntities(sm SemanticModel) {
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
}

// addSemanticDimensions adds the semantic model's dimensions; one the cube has already
// gains its time type and description.
func (c *cube) addSemanticDimensions(sm SemanticModel, warn warnFunc) {
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
}

// addSemanticMeasure adds a measure of the semantic model, or warns why it cannot; it
// returns the measure added.
func (c *cube) addSemanticMeasure(sm SemanticModel, m SMMeasure, warn warnFunc) *measure {
	if !sqlSafe(m.Expr) {
		warn(c.model.UniqueID, "measure %q of semantic model %q skipped: its expression has a brace", m.Name, sm.Name)
		return nil
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
		return nil
	}
	ms := &measure{Name: m.Name, SQL: sql, Type: typ, Title: m.Label, Description: strings.TrimSpace(m.Description)}
	if !c.addMeasure(ms, warn) {
		return nil
	}
	return ms
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
func applyMetrics(metrics []Metric, cubes map[string]*cube, measureCube map[string]memberRef, warn warnFunc) {
	sort.SliceStable(metrics, func(i, j int) bool { return metrics[i].Name < metrics[j].Name })
	// A metric resolves to a measure of a cube: simple metrics first, then those built on them.
	resolved := map[string]memberRef{}
	for _, mt := range metrics {
		if mt.Type == "simple" {
			if ref, ok := addSimpleMetric(mt, measureCube, warn); ok {
				resolved[mt.Name] = ref
			}
		}
	}
	for _, mt := range metrics {
		if mt.Type != "simple" {
			addCombinedMetric(mt, resolved, warn)
		}
	}
}

// addSimpleMetric resolves a simple metric to a measure: its input measure itself when
// it only names it, else a new measure over it with the metric's filters.
func addSimpleMetric(mt Metric, measureCube map[string]memberRef, warn warnFunc) (memberRef, bool) {
	ref, ok := measureCube[mt.Measure]
	if !ok {
		warn("metric."+mt.Name, "metric skipped: its measure %q is not in the data model", mt.Measure)
		return memberRef{}, false
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
		return ref, true
	}
	var filters []filter
	for _, f := range mt.Filters {
		sql, err := c.translateFilter(f)
		if err != nil {
			warn(c.model.UniqueID, "metric %q skipped: %v", mt.Name, err)
			return memberRef{}, false
		}
		filters = append(filters, filter{SQL: sql})
	}
	m := &measure{Name: mt.Name, SQL: base.SQL, Type: base.Type, Title: mt.Label, Description: strings.TrimSpace(mt.Description), Filters: filters}
	if !c.addMeasure(m, warn) {
		return memberRef{}, false
	}
	return memberRef{c, m.Name}, true
}

// addCombinedMetric adds a ratio or derived metric over resolved metrics of one cube.
func addCombinedMetric(mt Metric, resolved map[string]memberRef, warn warnFunc) {
	var inputs []string
	var sql string
	switch mt.Type {
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
		return
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
		return
	}
	c.addMeasure(&measure{Name: mt.Name, SQL: sql, Type: "number", Title: mt.Label, Description: strings.TrimSpace(mt.Description)}, warn)
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
