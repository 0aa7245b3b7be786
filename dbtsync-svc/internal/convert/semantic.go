package convert

import (
	"strconv"
	"strings"
)

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
