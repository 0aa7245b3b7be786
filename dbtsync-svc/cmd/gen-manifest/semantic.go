package main

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// semanticLayer collects the semantic models, metrics and saved queries of the
// generated project, in dbt's shape (manifest v12), written after the nodes.
type semanticLayer struct {
	models, metrics, savedQueries bytes.Buffer
}

func (s *semanticLayer) size() int64 {
	return int64(s.models.Len() + s.metrics.Len() + s.savedQueries.Len())
}

type where struct {
	WhereFilters []whereFilter `json:"where_filters"`
}

type whereFilter struct {
	SQL string `json:"where_sql_template"`
}

func filterOf(sql string) *where { return &where{[]whereFilter{{sql}}} }

type window struct {
	Count       int    `json:"count"`
	Granularity string `json:"granularity"`
}

type measureInput struct {
	Name            string `json:"name"`
	Filter          *where `json:"filter"`
	Alias           any    `json:"alias"`
	JoinToTimespine bool   `json:"join_to_timespine"`
	FillNullsWith   any    `json:"fill_nulls_with"`
}

type metricInput struct {
	Name          string  `json:"name"`
	Filter        *where  `json:"filter"`
	Alias         *string `json:"alias"`
	OffsetWindow  *window `json:"offset_window"`
	OffsetToGrain any     `json:"offset_to_grain"`
}

type cumulativeParams struct {
	Window      *window `json:"window"`
	GrainToDate *string `json:"grain_to_date"`
	PeriodAgg   string  `json:"period_agg"`
	Metric      any     `json:"metric"`
}

type typeParams struct {
	Measure       *measureInput     `json:"measure"`
	InputMeasures []measureInput    `json:"input_measures"`
	Numerator     *metricInput      `json:"numerator"`
	Denominator   *metricInput      `json:"denominator"`
	Expr          *string           `json:"expr"`
	Window        *window           `json:"window"`
	GrainToDate   *string           `json:"grain_to_date"`
	Metrics       []metricInput     `json:"metrics"`
	Conversion    any               `json:"conversion_type_params"`
	Cumulative    *cumulativeParams `json:"cumulative_type_params"`
	Aggregation   any               `json:"metric_aggregation_params"`
}

type metric struct {
	Name         string     `json:"name"`
	ResourceType string     `json:"resource_type"`
	PackageName  string     `json:"package_name"`
	UniqueID     string     `json:"unique_id"`
	Description  string     `json:"description"`
	Label        string     `json:"label"`
	Type         string     `json:"type"`
	TypeParams   typeParams `json:"type_params"`
	Filter       *where     `json:"filter"`
}

type entity struct {
	Name string  `json:"name"`
	Type string  `json:"type"`
	Expr *string `json:"expr"`
}

type dimension struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Expr       string `json:"expr"`
	TypeParams any    `json:"type_params"`
}

type measure struct {
	Name        string `json:"name"`
	Agg         string `json:"agg"`
	Expr        string `json:"expr"`
	AggParams   any    `json:"agg_params"`
	NonAdditive any    `json:"non_additive_dimension"`
	AggTime     any    `json:"agg_time_dimension"`
}

func str(s string) *string { return &s }

// add adds the semantic model of model i, its metrics, and every fifth one a saved
// query.
func (s *semanticLayer) add(i int) {
	model, sm := fmt.Sprintf("model_%06d", i), fmt.Sprintf("sm_%06d", i)
	e, k := fmt.Sprintf("e%d", i), fmt.Sprintf("k%d", i)
	entities := []entity{{Name: e, Type: "primary", Expr: str("id")}}
	if i > 0 {
		entities = append(entities, entity{Name: fmt.Sprintf("e%d", i-20), Type: "foreign", Expr: str("col_10")})
	}
	day := map[string]any{"time_granularity": "day", "validity_params": nil}
	dims := []dimension{{Name: "kind", Type: "categorical", Expr: "col_01"}, {Name: "at", Type: "time", Expr: "col_02", TypeParams: day},
		{Name: "flag", Type: "categorical", Expr: "col_03"}}
	var measures []measure
	for _, m := range [][3]string{{"amount", "sum", "col_04"}, {"entities", "count_distinct", "id"}, {"mean", "average", "col_08"},
		{"median", "median", "col_04"}, {"p90", "percentile", "col_08"}, {"flags", "sum_boolean", "col_03"}, {"largest", "max", "col_06"}, {"rows", "count", "id"}} {
		ms := measure{Name: fmt.Sprintf("m%d_%s", i, m[0]), Agg: m[1], Expr: m[2]}
		if m[1] == "percentile" {
			ms.AggParams = map[string]any{"percentile": 0.9, "use_discrete_percentile": false, "use_approximate_percentile": false}
		}
		measures = append(measures, ms)
	}
	s.write(&s.models, "semantic_model.bench."+sm, map[string]any{
		"name": sm, "resource_type": "semantic_model", "package_name": "bench", "unique_id": "semantic_model.bench." + sm,
		"model": "ref('" + model + "')", "description": "Semantic model of " + model, "defaults": map[string]string{"agg_time_dimension": "at"},
		"entities": entities, "dimensions": dims, "measures": measures, "depends_on": map[string]any{"macros": []string{}, "nodes": []string{"model.bench." + model}},
	})
	amount := fmt.Sprintf("m%d_amount", i)
	in := []measureInput{{Name: amount}}
	simple := func(name, label string, filter *where) metric {
		return metric{Name: name, Label: label, Type: "simple", Filter: filter, TypeParams: typeParams{Measure: &measureInput{Name: amount}, InputMeasures: in}}
	}
	metrics := []metric{
		simple(k+"_amount", "Amount", nil),
		simple(k+"_flagged", "Flagged amount", filterOf(fmt.Sprintf("{{ Dimension('%s__flag') }} = true", e))),
		{Name: k + "_share", Label: "Share of kind a", Type: "ratio", TypeParams: typeParams{InputMeasures: in,
			Numerator:   &metricInput{Name: k + "_amount", Filter: filterOf(fmt.Sprintf("{{ Dimension('%s__kind') }} = 'a'", e))},
			Denominator: &metricInput{Name: k + "_amount"}}},
		{Name: k + "_growth", Label: "Growth M/M", Type: "derived", TypeParams: typeParams{InputMeasures: in, Expr: str("amount - amount_prev"),
			Metrics: []metricInput{{Name: k + "_amount", Alias: str("amount")}, {Name: k + "_amount", Alias: str("amount_prev"), OffsetWindow: &window{1, "month"}}}}},
		{Name: k + "_7d", Label: "Amount, 7 days", Type: "cumulative", TypeParams: typeParams{Measure: &in[0], InputMeasures: in, Window: &window{7, "day"}}},
		{Name: k + "_mtd", Label: "Amount, month to date", Type: "cumulative", TypeParams: typeParams{Measure: &in[0], InputMeasures: in,
			Cumulative: &cumulativeParams{GrainToDate: str("month"), PeriodAgg: "first"}}},
		{Name: k + "_total", Label: "Amount, all time", Type: "cumulative", TypeParams: typeParams{Measure: &in[0], InputMeasures: in,
			Cumulative: &cumulativeParams{PeriodAgg: "first"}}},
		{Name: k + "_conversion", Label: "Conversion", Type: "conversion", TypeParams: typeParams{InputMeasures: in, Conversion: map[string]any{
			"entity": e, "base_measure": in[0], "conversion_measure": measureInput{Name: fmt.Sprintf("m%d_rows", i)}, "calculation": "conversion_rate",
			"window": window{7, "day"}, "constant_properties": nil}}},
	}
	if i > 0 {
		prev := fmt.Sprintf("k%d_amount", i-20)
		metrics = append(metrics, metric{Name: k + "_vs_previous", Label: "Against the previous model", Type: "derived",
			TypeParams: typeParams{InputMeasures: in, Expr: str(k + "_amount - " + prev), Metrics: []metricInput{{Name: k + "_amount"}, {Name: prev}}}})
	}
	for _, m := range metrics {
		m.ResourceType, m.PackageName, m.UniqueID = "metric", "bench", "metric.bench."+m.Name
		if m.TypeParams.Metrics == nil {
			m.TypeParams.Metrics = []metricInput{}
		}
		s.write(&s.metrics, m.UniqueID, m)
	}
	if i%100 == 0 {
		q := fmt.Sprintf("q%d", i)
		s.write(&s.savedQueries, "saved_query.bench."+q, map[string]any{
			"name": q, "resource_type": "saved_query", "package_name": "bench", "unique_id": "saved_query.bench." + q, "label": nil, "description": nil,
			"query_params": map[string]any{"metrics": []string{k + "_amount", k + "_share", k + "_7d"},
				"group_by": []string{"TimeDimension('metric_time', 'day')", fmt.Sprintf("Dimension('%s__kind')", e)},
				"where":    filterOf(fmt.Sprintf("{{ Dimension('%s__flag') }} = true", e)), "order_by": []string{}, "limit": nil},
		})
	}
}

// write appends "key":value to a JSON object's members.
func (s *semanticLayer) write(buf *bytes.Buffer, key string, v any) {
	if buf.Len() > 0 {
		buf.WriteByte(',')
	}
	k, _ := json.Marshal(key)
	val, err := json.Marshal(v)
	if err != nil {
		panic(err) // the values above always marshal
	}
	buf.Write(k)
	buf.WriteByte(':')
	buf.Write(val)
}
