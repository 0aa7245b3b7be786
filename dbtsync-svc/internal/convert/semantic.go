package convert

import (
	"strconv"
	"strings"
)

// The manifest's semantic layer as dbt writes it (schemas v10 to v12 and v20 for
// MetricFlow, v7 to v9 for the metrics before it), decoded leniently: a member of an
// unexpected shape reads as missing.

type rawSemanticModel struct {
	Name        string `json:"name"`
	Model       string `json:"model"`
	Description string `json:"description"`
	DependsOn   struct {
		Nodes []string `json:"nodes"`
	} `json:"depends_on"`
	Defaults *struct {
		AggTime string `json:"agg_time_dimension"`
	} `json:"defaults"`
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
		Label       string `json:"label"`
		TypeParams  *struct {
			Granularity string `json:"time_granularity"`
		} `json:"type_params"`
	} `json:"dimensions"`
	Measures []rawMeasure `json:"measures"`
}

type rawMeasure struct {
	Name        string          `json:"name"`
	Agg         string          `json:"agg"`
	Expr        any             `json:"expr"`
	Description string          `json:"description"`
	Label       string          `json:"label"`
	AggParams   *rawAggParams   `json:"agg_params"`
	AggTime     string          `json:"agg_time_dimension"`
	NonAdditive *rawNonAdditive `json:"non_additive_dimension"`
}

type rawAggParams struct {
	Percentile float64 `json:"percentile"`
	Discrete   bool    `json:"use_discrete_percentile"`
}

type rawNonAdditive struct {
	Name string `json:"name"`
}

func (r rawMeasure) toMeasure() SMMeasure {
	ms := SMMeasure{Name: r.Name, Agg: r.Agg, Expr: exprString(r.Expr), Description: r.Description, Label: r.Label, AggTime: r.AggTime}
	r.aggParams(&ms)
	return ms
}

func (r rawMeasure) aggParams(ms *SMMeasure) {
	if r.AggParams != nil {
		ms.Percentile, ms.Discrete = r.AggParams.Percentile, r.AggParams.Discrete
	}
	if r.NonAdditive != nil {
		ms.NonAdditive = r.NonAdditive.Name
		if ms.NonAdditive == "" {
			ms.NonAdditive = "unnamed"
		}
	}
}

// exprString reads an expr dbt writes as a string, or as a number for a constant.
func exprString(v any) string {
	switch e := v.(type) {
	case string:
		return e
	case float64:
		return strconv.FormatFloat(e, 'f', -1, 64)
	}
	return ""
}

func (r rawSemanticModel) toSemanticModel() SemanticModel {
	sm := SemanticModel{Name: r.Name, Model: ParseRef(r.Model), Description: r.Description}
	for _, id := range r.DependsOn.Nodes {
		if strings.HasPrefix(id, "model.") {
			sm.ModelID = id
			break
		}
	}
	if r.Defaults != nil {
		sm.DefaultAggTime = r.Defaults.AggTime
	}
	for _, e := range r.Entities {
		sm.Entities = append(sm.Entities, SMEntity{Name: e.Name, Type: e.Type, Expr: e.Expr})
	}
	for _, d := range r.Dimensions {
		dim := SMDimension{Name: d.Name, Type: d.Type, Expr: d.Expr, Description: d.Description, Label: d.Label}
		if d.TypeParams != nil {
			dim.Granularity = d.TypeParams.Granularity
		}
		sm.Dimensions = append(sm.Dimensions, dim)
	}
	for _, m := range r.Measures {
		sm.Measures = append(sm.Measures, m.toMeasure())
	}
	return sm
}

// rawWhere is a WhereFilterIntersection: every filter holds.
type rawWhere struct {
	WhereFilters []struct {
		SQL string `json:"where_sql_template"`
	} `json:"where_filters"`
}

func (w *rawWhere) list() []string {
	if w == nil {
		return nil
	}
	var out []string
	for _, f := range w.WhereFilters {
		if s := strings.TrimSpace(f.SQL); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// rawWindow is a MetricTimeWindow ({count, granularity}); the metrics before MetricFlow
// name the unit period.
type rawWindow struct {
	Count       int    `json:"count"`
	Granularity string `json:"granularity"`
	Period      string `json:"period"`
}

func (w *rawWindow) toWindow() *TimeWindow {
	if w == nil {
		return nil
	}
	g := w.Granularity
	if g == "" {
		g = w.Period
	}
	return &TimeWindow{Count: w.Count, Granularity: strings.ToLower(g)}
}

type rawMeasureInput struct {
	Name            string    `json:"name"`
	Filter          *rawWhere `json:"filter"`
	JoinToTimespine bool      `json:"join_to_timespine"`
	FillNullsWith   *float64  `json:"fill_nulls_with"`
}

type rawMetricInput struct {
	Name          string     `json:"name"`
	Filter        *rawWhere  `json:"filter"`
	Alias         string     `json:"alias"`
	OffsetWindow  *rawWindow `json:"offset_window"`
	OffsetToGrain string     `json:"offset_to_grain"`
}

func (r *rawMetricInput) toInput() *MetricInput {
	if r == nil {
		return nil
	}
	return &MetricInput{Name: r.Name, Alias: r.Alias, Filters: r.Filter.list(), OffsetWindow: r.OffsetWindow.toWindow(), OffsetToGrain: r.OffsetToGrain}
}

// rawMetric is a metric of either generation: MetricFlow's (type, type_params) or the
// one before it (calculation_method, expression, …; dbt 1.3 to 1.5).
type rawMetric struct {
	Name        string    `json:"name"`
	Label       string    `json:"label"`
	Description string    `json:"description"`
	Type        string    `json:"type"`
	Filter      *rawWhere `json:"filter"`
	TypeParams  struct {
		Measure     *rawMeasureInput `json:"measure"`
		Numerator   *rawMetricInput  `json:"numerator"`
		Denominator *rawMetricInput  `json:"denominator"`
		Expr        any              `json:"expr"`
		Window      *rawWindow       `json:"window"`
		GrainToDate string           `json:"grain_to_date"`
		Metrics     []rawMetricInput `json:"metrics"`
		Cumulative  *struct {
			Window      *rawWindow      `json:"window"`
			GrainToDate string          `json:"grain_to_date"`
			PeriodAgg   string          `json:"period_agg"`
			Metric      *rawMetricInput `json:"metric"`
		} `json:"cumulative_type_params"`
		Agg *struct {
			SemanticModel string `json:"semantic_model"`
			rawMeasure
		} `json:"metric_aggregation_params"`
	} `json:"type_params"`

	CalculationMethod string         `json:"calculation_method"`
	Expression        string         `json:"expression"`
	Timestamp         string         `json:"timestamp"`
	TimeGrains        []string       `json:"time_grains"`
	Dimensions        []string       `json:"dimensions"`
	Window            *rawWindow     `json:"window"`
	Model             string         `json:"model"`
	ModelUniqueID     string         `json:"model_unique_id"`
	Meta              map[string]any `json:"meta"`
	Filters           []struct {
		Field    string `json:"field"`
		Operator string `json:"operator"`
		Value    any    `json:"value"`
	} `json:"filters"`
}

func (r rawMetric) toMetric() Metric {
	tp := r.TypeParams
	m := Metric{Name: r.Name, Label: r.Label, Description: r.Description, Type: r.Type, Expr: exprString(tp.Expr),
		Filters: r.Filter.list(), Numerator: tp.Numerator.toInput(), Denominator: tp.Denominator.toInput(),
		Window: tp.Window.toWindow(), GrainToDate: tp.GrainToDate}
	if tp.Measure != nil {
		m.Measure = &MeasureInput{Name: tp.Measure.Name, Filters: tp.Measure.Filter.list(), FillNullsWith: tp.Measure.FillNullsWith, JoinToTimespine: tp.Measure.JoinToTimespine}
	}
	for i := range tp.Metrics {
		m.Inputs = append(m.Inputs, *tp.Metrics[i].toInput())
	}
	if c := tp.Cumulative; c != nil {
		if c.Window != nil {
			m.Window = c.Window.toWindow()
		}
		if c.GrainToDate != "" {
			m.GrainToDate = c.GrainToDate
		}
		m.PeriodAgg = c.PeriodAgg
		m.Cumulative = c.Metric.toInput()
	}
	if a := tp.Agg; a != nil && a.Agg != "" {
		ms := SMMeasure{Name: r.Name, Agg: a.Agg, Expr: m.Expr, Description: r.Description, Label: r.Label, AggTime: a.AggTime}
		a.aggParams(&ms)
		m.Agg, m.AggModel = &ms, a.SemanticModel
	}
	return m
}

func (r rawMetric) toLegacyMetric() LegacyMetric {
	lm := LegacyMetric{Name: r.Name, Label: r.Label, Description: r.Description, Method: strings.ToLower(r.CalculationMethod),
		Expression: r.Expression, Timestamp: r.Timestamp, TimeGrains: r.TimeGrains, Dimensions: r.Dimensions,
		Window: r.Window.toWindow(), Model: ParseRef(r.Model), ModelID: r.ModelUniqueID, Meta: r.Meta}
	for _, f := range r.Filters {
		v := exprString(f.Value)
		if b, ok := f.Value.(bool); ok {
			v = strconv.FormatBool(b)
		}
		lm.Filters = append(lm.Filters, LegacyFilter{Field: f.Field, Operator: f.Operator, Value: v})
	}
	return lm
}

type rawSavedQuery struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description"`
	QueryParams struct {
		Metrics []string  `json:"metrics"`
		GroupBy []string  `json:"group_by"`
		Where   *rawWhere `json:"where"`
		Limit   *int      `json:"limit"`
	} `json:"query_params"`
}

func (r rawSavedQuery) toSavedQuery() SavedQuery {
	q := r.QueryParams
	return SavedQuery{Name: r.Name, Label: r.Label, Description: r.Description, Metrics: q.Metrics, GroupBy: q.GroupBy, Where: q.Where.list(), Limit: q.Limit}
}
