package convert

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// legacyTypes maps a dbt 1.3-1.5 calculation_method to a Cube measure type.
var legacyTypes = map[string]string{"count": "count", "count_distinct": "count_distinct", "sum": "sum", "average": "avg", "min": "min", "max": "max"}

// legacyOperators are the filter operators dbt_metrics writes between field and value.
var legacyOperators = map[string]bool{"=": true, "!=": true, "<>": true, "<": true, ">": true, "<=": true, ">=": true, "is": true,
	"is not": true, "like": true, "not like": true, "ilike": true, "not ilike": true, "in": true, "not in": true, "between": true, "not between": true}

var metricCallRE = regexp.MustCompile(`\{\{\s*metric\(\s*['"]([^'"]+)['"]\s*\)\s*\}\}`)

// applyLegacyMetrics turns the metrics of dbt 1.3 to 1.5 (manifests v7 to v9) into
// measures of their model's cube, as MetricFlow metrics are: an aggregation of an
// expression with its filters, over a trailing window when it has one; a derived metric
// a number measure over the others. Its timestamp becomes a time dimension; time_grains
// and dimensions, which Cube does not enforce, go in the measure's meta.
func (b *builder) applyLegacyMetrics(lms []LegacyMetric) {
	sort.SliceStable(lms, func(i, j int) bool { return lms[i].Name < lms[j].Name })
	byName := map[string]*LegacyMetric{}
	for i := range lms {
		byName[lms[i].Name] = &lms[i]
	}
	done := map[string]*measureRef{}
	var resolve func(name string) *measureRef
	resolve = func(name string) *measureRef {
		if r, ok := done[name]; ok {
			return r
		}
		lm := byName[name]
		if lm == nil || b.visiting["legacy."+name] {
			return nil
		}
		b.visiting["legacy."+name] = true
		var r *measureRef
		var err error
		if lm.Method == "derived" || lm.Method == "expression" {
			r, err = b.legacyDerived(lm, resolve)
		} else {
			r, err = b.legacyMeasure(lm)
		}
		delete(b.visiting, "legacy."+name)
		if err != nil {
			b.warn("metric."+name, "metric skipped: %v", err)
		}
		done[name] = r
		return r
	}
	for _, lm := range lms {
		if lm.Method != "derived" && lm.Method != "expression" {
			resolve(lm.Name)
		}
	}
	for _, lm := range lms {
		resolve(lm.Name)
	}
}

// legacyMeasure is the measure of a metric that aggregates an expression.
func (b *builder) legacyMeasure(lm *LegacyMetric) (*measureRef, error) {
	key := b.index.resolve(lm.ModelID, lm.Model)
	c := b.cubes[key]
	if c == nil {
		return nil, fmt.Errorf("its model %q is not part of the data model", key)
	}
	m := &measure{Name: lm.Name, Title: lm.Label, Description: strings.TrimSpace(lm.Description)}
	expr := strings.TrimSpace(lm.Expression)
	if !sqlSafe(expr) {
		return nil, errors.New("its expression has a brace")
	}
	if typ, ok := legacyTypes[lm.Method]; ok {
		m.Type = typ
		if expr != "" && expr != "*" {
			m.SQL = c.exprSQL(expr, "")
		} else if typ != "count" {
			return nil, fmt.Errorf("a %s metric needs an expression", lm.Method)
		}
	} else if lm.Method == "median" && expr != "" {
		m.percentile = &percentile{fraction: 0.5, expr: c.exprSQL(expr, "")}
		m.Type, m.SQL = "number", m.percentile.sql()
	} else {
		return nil, fmt.Errorf("calculation_method %q has no Cube measure type", lm.Method)
	}
	var conds []string
	for _, f := range lm.Filters {
		sql, err := c.legacyFilter(f)
		if err != nil {
			return nil, err
		}
		m.Filters, conds = append(m.Filters, filter{SQL: sql}), append(conds, "("+sql+")")
	}
	if p := m.percentile; p != nil && len(conds) > 0 {
		p.expr = "CASE WHEN " + strings.Join(conds, " AND ") + " THEN " + p.expr + " END"
		m.SQL, m.Filters = p.sql(), nil
	}
	if lm.Timestamp != "" {
		m.aggTime = c.timeDimension(lm.Timestamp)
	}
	if lm.Window != nil {
		interval, err := cubeInterval(*lm.Window)
		if err != nil {
			return nil, fmt.Errorf("its window is %v", err)
		}
		if m.percentile != nil {
			return nil, errors.New("a median over a window has no Cube equivalent (a rolling window accumulates aggregations only)")
		}
		m.RollingWindow = &rollingWindow{Trailing: interval}
	}
	m.Meta = lm.Meta
	if len(lm.TimeGrains) > 0 {
		m.Meta = withMeta(m.Meta, "time_grains", stringsAny(lm.TimeGrains))
	}
	if len(lm.Dimensions) > 0 {
		m.Meta = withMeta(m.Meta, "dimensions", stringsAny(lm.Dimensions))
	}
	if err := b.addMetricMeasure(c, m); err != nil {
		return nil, err
	}
	return &measureRef{c, m, nil}, nil
}

// legacyFilter is a legacy metric's filter as cube SQL: field operator value, the field
// quoted as the cube's dimension of it is.
func (c *cube) legacyFilter(f LegacyFilter) (string, error) {
	op := strings.ToLower(strings.Join(strings.Fields(f.Operator), " "))
	if !legacyOperators[op] {
		return "", fmt.Errorf("its filter operator %q is not one the data model can express", f.Operator)
	}
	if !sqlSafe(f.Field) || !sqlSafe(f.Value) || strings.TrimSpace(f.Field) == "" {
		return "", fmt.Errorf("its filter on %q has a brace", f.Field)
	}
	return c.exprSQL(strings.TrimSpace(f.Field), "") + " " + op + " " + sqlEscape(strings.TrimSpace(f.Value)), nil
}

// timeDimension makes the column (or dimension) col a time dimension of c, adding it
// when the model did not document it, and returns its name ("" when it cannot).
func (c *cube) timeDimension(col string) string {
	d := c.dimension(col)
	if d == nil {
		if !isIdent(col) {
			return ""
		}
		d = c.columnDimension(col, false, "time")
	}
	d.Type = "time"
	return d.Name
}

// legacyDerived is the number measure of a derived metric: its expression over the
// measures of the metrics it names ({{ metric('x') }}, or x).
func (b *builder) legacyDerived(lm *LegacyMetric, resolve func(string) *measureRef) (*measureRef, error) {
	expr := metricCallRE.ReplaceAllString(lm.Expression, "$1")
	var inputs []MetricInput
	var refs []*measureRef
	seen := map[string]bool{}
	for _, w := range exprWordRE.FindAllString(expr, -1) {
		if seen[w] || w[0] == '\'' || sqlKeyword[strings.ToLower(w)] {
			continue
		}
		seen[w] = true
		r := resolve(w)
		if r == nil {
			continue // a function, or a metric that does not convert: derivedSQL names it
		}
		inputs, refs = append(inputs, MetricInput{Name: w}), append(refs, r)
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("its expression %q names no metric that converts", lm.Expression)
	}
	host := b.hostOf(refs)
	if host == nil {
		return nil, fmt.Errorf("its inputs are measures of cubes %s, which no join connects", cubeList(refs))
	}
	names, multi := references(host, refs)
	sql, err := derivedSQL(expr, inputs, names)
	if err != nil {
		return nil, err
	}
	m := &measure{Name: lm.Name, SQL: sql, Type: "number", MultiStage: multi, Title: lm.Label, Description: strings.TrimSpace(lm.Description), Meta: lm.Meta}
	if err := b.addMetricMeasure(host, m); err != nil {
		return nil, err
	}
	return &measureRef{host, m, nil}, nil
}

func stringsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
