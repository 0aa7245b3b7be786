package convert

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// applyMetrics turns MetricFlow metrics into cube measures that compute what MetricFlow
// computes: a simple metric is its measure (with its filters), a ratio or a derived
// metric a number measure over its inputs' measures (multi-stage when they live in more
// than one cube or one of them is), a cumulative metric a rolling_window measure. What
// Cube cannot express is a warning naming the metric and why.
func (b *builder) applyMetrics(metrics []Metric) {
	sort.SliceStable(metrics, func(i, j int) bool { return metrics[i].Name < metrics[j].Name })
	for i := range metrics {
		b.metrics[metrics[i].Name] = &metrics[i]
	}
	// Simple metrics first: they are the measures the others are made of.
	for _, mt := range metrics {
		if mt.Type == "simple" {
			b.resolve(mt.Name)
		}
	}
	for _, mt := range metrics {
		b.resolve(mt.Name)
	}
}

// resolve converts the metric of that name, once, and returns its measure; nil when it
// does not convert (a warning says why).
func (b *builder) resolve(name string) *measureRef {
	if r, done := b.resolved[name]; done {
		return r
	}
	mt := b.metrics[name]
	if mt == nil || b.visiting[name] {
		return nil
	}
	b.visiting[name] = true
	r, err := b.convertMetric(mt)
	delete(b.visiting, name)
	if err != nil {
		b.warn("metric."+name, "metric skipped: %v", err)
		r = nil
	}
	b.resolved[name] = r
	return r
}

func (b *builder) convertMetric(mt *Metric) (*measureRef, error) {
	switch mt.Type {
	case "simple":
		return b.simpleMetric(mt)
	case "ratio":
		if mt.Numerator == nil || mt.Denominator == nil {
			return nil, errors.New("it has no numerator or no denominator")
		}
		return b.combine(mt, []MetricInput{*mt.Numerator, *mt.Denominator}, []string{"numerator", "denominator"}, func(ref []string) (string, error) {
			return "1.0 * " + ref[0] + " / NULLIF(" + ref[1] + ", 0)", nil
		})
	case "derived":
		if len(mt.Inputs) == 0 {
			return nil, errors.New("it has no input metrics")
		}
		return b.combine(mt, mt.Inputs, nil, func(ref []string) (string, error) { return derivedSQL(mt.Expr, mt.Inputs, ref) })
	case "cumulative":
		return b.cumulativeMetric(mt)
	case "conversion":
		return nil, errors.New("a conversion metric counts base events followed by a conversion event of the same entity within a window, which no Cube measure expresses")
	}
	return nil, fmt.Errorf("metric type %q is not known", mt.Type)
}

// inputMeasure is the measure a simple or cumulative metric aggregates; for a metric
// defined without a measure (metric_aggregation_params), its aggregation, not yet in its
// cube.
func (b *builder) inputMeasure(mt *Metric) (*measureRef, error) {
	if mt.Measure == nil && mt.Agg != nil {
		info := b.semantic[mt.AggModel]
		if info == nil {
			return nil, fmt.Errorf("its semantic model %q is not in the data model", mt.AggModel)
		}
		ms, why := info.measure(*mt.Agg)
		if why != "" {
			return nil, errors.New(why)
		}
		return &measureRef{info.cube, ms, info}, nil
	}
	if mt.Measure == nil {
		return nil, errors.New("it names no input measure")
	}
	ref := b.measures[mt.Measure.Name]
	if ref == nil {
		if why := b.skipped[mt.Measure.Name]; why != "" {
			return nil, fmt.Errorf("its measure %q is not converted: %s", mt.Measure.Name, why)
		}
		return nil, fmt.Errorf("its measure %q is not in the data model", mt.Measure.Name)
	}
	return ref, nil
}

// simpleMetric is its input measure itself when it only names it, else a measure over
// it narrowed by the metric's filters; with fill_nulls_with, a number measure filling
// that one's nulls.
func (b *builder) simpleMetric(mt *Metric) (*measureRef, error) {
	base, err := b.inputMeasure(mt)
	if err != nil {
		return nil, err
	}
	var fill *float64
	filters, own := mt.Filters, false
	if mt.Measure != nil {
		filters = append(append([]string(nil), mt.Measure.Filters...), mt.Filters...)
		fill, own = mt.Measure.FillNullsWith, mt.Name == mt.Measure.Name
		if mt.Measure.JoinToTimespine {
			b.warn("metric."+mt.Name, "metric converted without join_to_timespine: Cube gives no row for a period without data, where MetricFlow gives one (null, or fill_nulls_with)")
		}
	}
	c, inner := base.cube, base.m
	if !own || len(filters) > 0 {
		if inner, err = b.narrowed(base, mt.Name, filters); err != nil {
			return nil, err
		}
		if err := b.addMetricMeasure(c, inner); err != nil {
			return nil, err
		}
	}
	labelMeasure(inner, mt)
	if fill == nil {
		return &measureRef{c, inner, base.sm}, nil
	}
	// The aggregation goes on under another name, hidden; the metric is the measure that
	// fills its nulls.
	c.renameMeasure(inner, mt.Name+"_unfilled")
	inner.Hidden = true
	m := &measure{Name: mt.Name, SQL: "COALESCE({" + inner.Name + "}, " + strconv.FormatFloat(*fill, 'f', -1, 64) + ")", Type: "number",
		MultiStage: inner.MultiStage, Title: inner.Title, Description: inner.Description, aggTime: inner.aggTime}
	c.addMeasure(m, b.warn)
	return &measureRef{c, m, nil}, nil
}

// labelMeasure gives m the metric's label and description, unless it has its own.
func labelMeasure(m *measure, mt *Metric) {
	if m.Title == "" {
		m.Title = mt.Label
	}
	if m.Description == "" {
		m.Description = strings.TrimSpace(mt.Description)
	}
}

// addMetricMeasure adds a metric's measure to c; a name the cube has for a measure
// already makes the metric a warning.
func (b *builder) addMetricMeasure(c *cube, m *measure) error {
	if n, _ := memberName(m.Name); c.measure(n) != nil {
		return fmt.Errorf("cube %q already has a measure named %q", c.Name, n)
	}
	c.addMeasure(m, b.warn)
	return nil
}

// aggregates are the measure types Cube narrows with filters and accumulates over a
// rolling window.
var aggregates = map[string]bool{"count": true, "count_distinct": true, "count_distinct_approx": true, "sum": true, "avg": true, "min": true, "max": true}

// narrowed is a copy of base's measure named name, with filters (MetricFlow where
// filters, read from base's semantic model) added to its own.
func (b *builder) narrowed(base *measureRef, name string, filters []string) (*measure, error) {
	src := base.m
	m := &measure{Name: name, SQL: src.SQL, Type: src.Type, Filters: append([]filter(nil), src.Filters...), RollingWindow: src.RollingWindow,
		Meta: src.Meta, aggTime: src.aggTime, percentile: src.percentile}
	if len(filters) == 0 {
		return m, nil
	}
	if src.percentile == nil && (src.MultiStage || !aggregates[src.Type]) {
		return nil, fmt.Errorf("a filter cannot narrow %q, a %s measure", src.Name, src.Type)
	}
	scope := filterScope{b: b, host: base.cube, sm: base.sm, aggTime: src.aggTime}
	var conds []string
	for _, f := range filters {
		sql, err := scope.translate(f)
		if err != nil {
			return nil, err
		}
		m.Filters = append(m.Filters, filter{SQL: sql})
		conds = append(conds, "("+sql+")")
	}
	if p := src.percentile; p != nil {
		// A percentile is a number measure, which Cube's filters do not narrow: the
		// condition goes inside it (percentiles skip nulls).
		np := *p
		np.expr = "CASE WHEN " + strings.Join(conds, " AND ") + " THEN " + p.expr + " END"
		m.SQL, m.Filters, m.percentile = np.sql(), nil, &np
	}
	return m, nil
}

// input is the measure standing for one input of a ratio or derived metric: the input
// metric's measure, narrowed by the input's filters and the metric's own, shifted by its
// offset_window. A measure made for it is named <metric>_<alias, role or input>.
func (b *builder) input(mt *Metric, in MetricInput, role string) (*measureRef, error) {
	if b.metrics[in.Name] == nil {
		return nil, fmt.Errorf("its input metric %q is not in the manifest", in.Name)
	}
	if b.visiting[in.Name] {
		return nil, fmt.Errorf("its input metric %q refers back to it", in.Name)
	}
	r := b.resolve(in.Name)
	if r == nil {
		return nil, fmt.Errorf("its input metric %q is not converted", in.Name)
	}
	if in.OffsetToGrain != "" {
		return nil, fmt.Errorf("its input %q is offset to the start of its %s (offset_to_grain), which Cube's time_shift (an interval) does not express", in.Name, in.OffsetToGrain)
	}
	name := mt.Name + "_" + firstOf(in.Alias, role, in.Name)
	if filters := append(append([]string(nil), in.Filters...), mt.Filters...); len(filters) > 0 {
		narrowedName := name
		if in.OffsetWindow != nil {
			narrowedName += "_unshifted"
		}
		m, err := b.narrowed(r, narrowedName, filters)
		if err != nil {
			return nil, fmt.Errorf("input %q: %v", in.Name, err)
		}
		m.Hidden = true
		r.cube.addHelper(m)
		r = &measureRef{r.cube, m, r.sm}
	}
	if in.OffsetWindow != nil {
		interval, err := cubeInterval(*in.OffsetWindow)
		if err != nil {
			return nil, fmt.Errorf("its input %q is offset by %v", in.Name, err)
		}
		m := &measure{Name: name, SQL: "{" + r.m.Name + "}", Type: "number", MultiStage: true, Hidden: true,
			TimeShift: &timeShift{Interval: interval, TimeDimension: r.m.aggTime}, aggTime: r.m.aggTime}
		r.cube.addHelper(m)
		r = &measureRef{r.cube, m, nil}
	}
	return r, nil
}

// combine adds the number measure of a ratio or derived metric over its inputs (in
// their roles, for a ratio), in the cube of the first input from which a join reaches
// every other input's cube; sql writes the expression from the inputs' references.
func (b *builder) combine(mt *Metric, inputs []MetricInput, roles []string, sql func(ref []string) (string, error)) (*measureRef, error) {
	refs := make([]*measureRef, len(inputs))
	for i, in := range inputs {
		role := ""
		if roles != nil {
			role = roles[i]
		}
		r, err := b.input(mt, in, role)
		if err != nil {
			return nil, err
		}
		refs[i] = r
	}
	host := b.hostOf(refs)
	if host == nil {
		return nil, fmt.Errorf("its inputs are measures of cubes %s, which no join connects", cubeList(refs))
	}
	names, multi := references(host, refs)
	expr, err := sql(names)
	if err != nil {
		return nil, err
	}
	m := &measure{Name: mt.Name, SQL: expr, Type: "number", MultiStage: multi, Title: mt.Label, Description: strings.TrimSpace(mt.Description)}
	if refs[0].cube == host {
		m.aggTime = refs[0].m.aggTime
	}
	if err := b.addMetricMeasure(host, m); err != nil {
		return nil, err
	}
	return &measureRef{host, m, nil}, nil
}

// references are refs' measures as a measure of host names them; a measure naming
// another cube's measure, or a multi-stage one, is multi-stage itself (each input is
// then computed on its own and joined on the query's dimensions, as MetricFlow does).
func references(host *cube, refs []*measureRef) (names []string, multiStage bool) {
	names = make([]string, len(refs))
	for i, r := range refs {
		names[i] = "{" + r.m.Name + "}"
		if r.cube != host {
			names[i] = "{" + r.cube.Name + "." + r.m.Name + "}"
		}
		multiStage = multiStage || r.cube != host || r.m.MultiStage
	}
	return names, multiStage
}

// hostOf is the cube of the first input from which joins reach every input's cube.
func (b *builder) hostOf(refs []*measureRef) *cube {
	for _, r := range refs {
		reachesAll := true
		for _, o := range refs {
			reachesAll = reachesAll && b.joinPath(r.cube, o.cube) != nil
		}
		if reachesAll {
			return r.cube
		}
	}
	return nil
}

func cubeList(refs []*measureRef) string {
	var names []string
	seen := map[string]bool{}
	for _, r := range refs {
		if !seen[r.cube.Name] {
			seen[r.cube.Name] = true
			names = append(names, strconv.Quote(r.cube.Name))
		}
	}
	return strings.Join(names, ", ")
}

// cumulativeMetric accumulates its input measure (or input metric) over a trailing
// window (window), from the start of a grain (grain_to_date), or over all time.
func (b *builder) cumulativeMetric(mt *Metric) (*measureRef, error) {
	var base *measureRef
	var filters []string
	switch in := mt.Cumulative; {
	case mt.Measure != nil:
		r, err := b.inputMeasure(mt)
		if err != nil {
			return nil, err
		}
		base, filters = r, append(append([]string(nil), mt.Measure.Filters...), mt.Filters...)
	case in != nil:
		if in.OffsetWindow != nil || in.OffsetToGrain != "" {
			return nil, fmt.Errorf("its input %q has an offset, which a rolling window does not take", in.Name)
		}
		if base = b.resolve(in.Name); base == nil {
			return nil, fmt.Errorf("its input metric %q is not converted", in.Name)
		}
		filters = append(append([]string(nil), in.Filters...), mt.Filters...)
	default:
		return nil, errors.New("it names no input measure or metric")
	}
	if base.m.MultiStage || !aggregates[base.m.Type] || base.m.RollingWindow != nil {
		return nil, fmt.Errorf("its input %q is a %s measure, which a rolling window does not accumulate", base.m.Name, base.m.Type)
	}
	switch mt.PeriodAgg {
	case "", "first", "last":
	default:
		return nil, fmt.Errorf("period_agg %q (the %s of the cumulative values in each period of a coarser grain) has no Cube equivalent", mt.PeriodAgg, mt.PeriodAgg)
	}
	rw := &rollingWindow{Trailing: "unbounded"}
	switch {
	case mt.Window != nil:
		interval, err := cubeInterval(*mt.Window)
		if err != nil {
			return nil, fmt.Errorf("its window is %v", err)
		}
		rw.Trailing = interval
	case mt.GrainToDate != "":
		g := strings.ToLower(mt.GrainToDate)
		if !cubeGrains[g] {
			return nil, fmt.Errorf("its grain_to_date %q is not a granularity Cube knows (minute to year)", mt.GrainToDate)
		}
		rw = &rollingWindow{Type: "to_date", Granularity: g}
	}
	m, err := b.narrowed(base, mt.Name, filters)
	if err != nil {
		return nil, err
	}
	m.RollingWindow, m.Title, m.Description = rw, mt.Label, strings.TrimSpace(mt.Description)
	if err := b.addMetricMeasure(base.cube, m); err != nil {
		return nil, err
	}
	return &measureRef{base.cube, m, base.sm}, nil
}

// cubeGrains are the granularities of Cube's time intervals.
var cubeGrains = map[string]bool{"minute": true, "hour": true, "day": true, "week": true, "month": true, "quarter": true, "year": true}

// cubeInterval is a MetricFlow window as a Cube interval ("7 day").
func cubeInterval(w TimeWindow) (string, error) {
	g := strings.TrimSuffix(strings.ToLower(w.Granularity), "s")
	if !cubeGrains[g] || w.Count <= 0 {
		return "", fmt.Errorf("%d %s, which is not a Cube interval (a positive count of minute to year)", w.Count, w.Granularity)
	}
	return strconv.Itoa(w.Count) + " " + g, nil
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}
