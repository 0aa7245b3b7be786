package convert

import (
	"fmt"
	"sort"
	"strings"
)

// metricFlowAgg maps MetricFlow aggregations to Cube measure types.
var metricFlowAgg = map[string]string{
	"sum": "sum", "count": "count", "count_distinct": "count_distinct", "min": "min", "max": "max", "average": "avg",
}

// smInfo is a semantic model placed on the cube of its model.
type smInfo struct {
	sm       SemanticModel
	cube     *cube
	dims     map[string]*dimension // semantic dimension name -> the cube's dimension
	entities map[string]*dimension // entity name -> the cube's dimension of it (nil for an undocumented foreign key column)
	aggTime  string                // the default agg_time_dimension, as the cube's dimension name
	metas    map[string]map[string]any
}

// smEntity is an entity as one semantic model declares it.
type smEntity struct {
	info *smInfo
	e    SMEntity
}

// measureRef is a measure of a cube that a metric resolves to; sm is the semantic model
// whose dimensions its filters name (nil for a metric combining others).
type measureRef struct {
	cube *cube
	m    *measure
	sm   *smInfo
}

// applySemanticModels adds MetricFlow entities (keys), dimensions and measures to the
// cubes of the models they name.
func (b *builder) applySemanticModels(sms []SemanticModel) {
	sort.SliceStable(sms, func(i, j int) bool { return sms[i].Name < sms[j].Name })
	for _, sm := range sms {
		key := b.index.resolve(sm.ModelID, sm.Model)
		c := b.cubes[key]
		if c == nil {
			b.warn("semantic_model."+sm.Name, "semantic model skipped: model %q is not part of the data model", key)
			continue
		}
		info := &smInfo{sm: sm, cube: c, dims: map[string]*dimension{}, entities: map[string]*dimension{}}
		b.semantic[sm.Name] = info
		b.addEntities(info)
		info.addDimensions(b.warn)
		info.aggTime = info.dimName(sm.DefaultAggTime)
		for _, m := range sm.Measures {
			b.addSemanticMeasure(info, m)
		}
	}
}

// dimName is the cube's name of the semantic dimension (or entity) named name.
func (info *smInfo) dimName(name string) string {
	if d := info.dims[name]; d != nil {
		return d.Name
	}
	if d := info.entities[name]; d != nil {
		return d.Name
	}
	return ""
}

// addEntities marks the columns of the semantic model's primary entity as the cube's key
// (adding a dimension for a column the model did not document, or for an expression),
// and records every entity for the joins between semantic models.
func (b *builder) addEntities(info *smInfo) {
	c := info.cube
	for _, e := range info.sm.Entities {
		b.entities[e.Name] = append(b.entities[e.Name], &smEntity{info, e})
		col := e.Expr
		if col == "" {
			col = e.Name
		}
		d := c.dimension(col)
		keyed := e.Type == "primary" || e.Type == "unique" || e.Type == "natural"
		switch {
		case d != nil:
		case isIdent(col) && keyed:
			d = c.columnDimension(col, false, "string")
		case !isIdent(col) && sqlSafe(col):
			d = c.addDimension(e.Name, col, "string")
		}
		if d != nil && e.Type == "primary" {
			d.PrimaryKey = true
		}
		info.entities[e.Name] = d
	}
}

// addDimensions adds the semantic model's dimensions; one the cube has already (the
// same column) gains its time type, granularity and description.
func (info *smInfo) addDimensions(warn warnFunc) {
	c := info.cube
	for _, d := range info.sm.Dimensions {
		typ := "string"
		if d.Type == "time" {
			typ = "time"
		}
		dim := c.dimension(d.Name)
		if dim != nil && d.Expr != "" && d.Expr != d.Name && !(isIdent(d.Expr) && dim.column == d.Expr) {
			dim = nil // the same name for another expression: a dimension of its own
		}
		if dim == nil {
			if !sqlSafe(d.Expr) {
				warn(c.modelID, "dimension %q of semantic model %q skipped: its expression has a brace", d.Name, info.sm.Name)
				continue
			}
			if src := c.dimension(d.Expr); src != nil && typ == "string" {
				typ = src.Type
			}
			dim = c.addDimension(d.Name, c.exprSQL(d.Expr, d.Name), typ)
		}
		if typ == "time" {
			dim.Type = "time"
		}
		if dim.Description == "" {
			dim.Description = strings.TrimSpace(d.Description)
		}
		if dim.Title == "" && d.Label != "" {
			dim.Title = d.Label
		}
		if d.Type == "time" && d.Granularity != "" {
			dim.Meta = withMeta(dim.Meta, "time_granularity", d.Granularity)
		}
		info.dims[d.Name] = dim
	}
}

// withMeta is m with key set to v unless m has it already; m itself is not changed (it
// may be the model's own meta).
func withMeta(m map[string]any, key string, v any) map[string]any {
	if _, ok := m[key]; ok {
		return m
	}
	out := make(map[string]any, len(m)+1)
	for k, x := range m {
		out[k] = x
	}
	out[key] = v
	return out
}

// addSemanticMeasure adds a measure of the semantic model, or warns why it cannot.
func (b *builder) addSemanticMeasure(info *smInfo, m SMMeasure) {
	c := info.cube
	ms, why := info.measure(m)
	if why != "" {
		b.warn(c.modelID, "measure %q of semantic model %q skipped: %s", m.Name, info.sm.Name, why)
		b.skipped[m.Name] = why
		return
	}
	if !c.addMeasure(ms, b.warn) {
		b.skipped[m.Name] = "the cube already has a measure of that name"
		return
	}
	b.measures[m.Name] = &measureRef{c, ms, info}
}

// measure is the cube measure of a MetricFlow measure (or of a simple metric's
// aggregation), or why there is none.
func (info *smInfo) measure(m SMMeasure) (*measure, string) {
	c := info.cube
	if m.NonAdditive != "" {
		return nil, fmt.Sprintf("its non_additive_dimension %q makes it semi-additive (one value per %s, chosen per query grain), which no Cube measure type computes", m.NonAdditive, m.NonAdditive)
	}
	if !sqlSafe(m.Expr) {
		return nil, "its expression has a brace"
	}
	sql := c.exprSQL(m.Expr, m.Name)
	ms := &measure{Name: m.Name, Title: m.Label, Description: strings.TrimSpace(m.Description)}
	typ, ok := metricFlowAgg[m.Agg]
	switch {
	case ok:
		ms.Type, ms.SQL = typ, sql
	case m.Agg == "sum_boolean":
		ms.Type, ms.SQL = "sum", "CASE WHEN "+sql+" THEN 1 ELSE 0 END"
	case m.Agg == "median" || m.Agg == "percentile":
		p := &percentile{fraction: m.Percentile, discrete: m.Discrete, expr: sql}
		if m.Agg == "median" || p.fraction == 0 {
			p.fraction = 0.5
		}
		ms.Type, ms.SQL, ms.percentile = "number", p.sql(), p
	default:
		return nil, fmt.Sprintf("unsupported aggregation %q", m.Agg)
	}
	ms.aggTime = info.dimName(m.AggTime)
	if ms.aggTime == "" {
		ms.aggTime = info.aggTime
	}
	ms.Meta = info.aggTimeMeta(ms.aggTime)
	return ms, ""
}

// aggTimeMeta is the meta of a measure aggregated by the time dimension aggTime, one
// map for all the semantic model's measures of that dimension (nothing changes a meta
// map once made).
func (info *smInfo) aggTimeMeta(aggTime string) map[string]any {
	if aggTime == "" {
		return nil
	}
	if info.metas == nil {
		info.metas = map[string]map[string]any{}
	}
	m := info.metas[aggTime]
	if m == nil {
		m = map[string]any{"agg_time_dimension": aggTime}
		info.metas[aggTime] = m
	}
	return m
}

// sql is the percentile's SQL.
func (p *percentile) sql() string {
	fn := "PERCENTILE_CONT"
	if p.discrete {
		fn = "PERCENTILE_DISC"
	}
	return fmt.Sprintf("%s(%g) WITHIN GROUP (ORDER BY %s)", fn, p.fraction, p.expr)
}
