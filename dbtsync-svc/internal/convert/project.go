// Package convert turns a dbt project (its manifest.json, or its project files) into the
// data model: one YAML file per dbt model at model/cubes/<model_name>.yml.
package convert

import "errors"

// Project is what the conversion needs of a dbt project, whichever way it was read.
type Project struct {
	SchemaVersion  int    // manifest schema version (0 when read from project files)
	Adapter        string // metadata.adapter_type: how the warehouse quotes and folds names
	Models         []*Model
	Tests          []Test
	SemanticModels []SemanticModel
	Metrics        []Metric
}

// Model is one dbt model node, reduced to the fields the data model uses.
type Model struct {
	UniqueID     string
	Name         string
	Alias        string
	RelationName string // dbt's own quoted name of the table or view, when the manifest has it
	Database     string
	Schema       string
	Description  string
	Materialized string
	Enabled      bool
	Columns      []Column
	Meta         map[string]any // meta merged with config.meta, config.meta winning
	PrimaryKey   []string       // dbt 1.9+ `primary_key` of the node, then model-level primary_key constraints
	Err          string         // a problem found while reading the node (the model becomes a warning)
}

// Column is one documented column of a model.
type Column struct {
	Name        string
	Description string
	DataType    string
	Meta        map[string]any
	Quote       bool // dbt's quote: true
	PrimaryKey  bool // a primary_key constraint or the primary_key tag on the column
}

// Test is a generic data test attached to a model column.
type Test struct {
	Kind     string // unique, not_null, relationships (others are dropped while reading)
	Model    string // the tested model's name
	Column   string
	ToModel  string // relationships: the referenced model's name ("" for a source)
	ToColumn string // relationships: the referenced column
}

// SemanticModel is a MetricFlow semantic model (dbt 1.6+).
type SemanticModel struct {
	Name       string
	Model      string // the dbt model's name, from ref('...')
	Entities   []SMEntity
	Dimensions []SMDimension
	Measures   []SMMeasure
}

// SMEntity is an entity of a semantic model.
type SMEntity struct {
	Name string
	Type string
	Expr string
}

// SMDimension is a dimension of a semantic model.
type SMDimension struct {
	Name        string
	Type        string // categorical or time
	Expr        string
	Description string
}

// SMMeasure is a measure of a semantic model.
type SMMeasure struct {
	Name        string
	Agg         string
	Expr        string
	Description string
	Label       string
	Percentile  float64
}

// Metric is a MetricFlow metric.
type Metric struct {
	Name        string
	Label       string
	Description string
	Type        string // simple, ratio, derived, cumulative, conversion
	Measure     string // simple: the input measure
	Filters     []string
	Numerator   string
	Denominator string
	Expr        string
	Inputs      []string // derived: the metrics referenced
}

// Errors that fail a whole job (a bad model is only a warning).
var (
	ErrNotJSON     = errors.New("manifest is not valid JSON")
	ErrNoNodes     = errors.New("manifest has no nodes")
	ErrNotManifest = errors.New("manifest is not a JSON object")
	// ErrUnsupportedVersion names a manifest schema version outside v7 to v12 and v20.
	ErrUnsupportedVersion = errors.New("unsupported manifest schema version")
)
