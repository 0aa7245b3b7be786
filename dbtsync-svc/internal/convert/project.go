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
	SavedQueries   []SavedQuery
	LegacyMetrics  []LegacyMetric
	// What model selection reads: the project's name (metadata.project_name, or
	// dbt_project.yml's name), whether the project was read from a manifest (which has
	// the dependency graph), and the manifest's nodes that are neither models nor tests
	// (seeds, snapshots, analyses…), which a graph operator walks through.
	ProjectName  string
	FromManifest bool
	Others       []GraphNode
}

// NodeInfo is what model selection reads of a node.
type NodeInfo struct {
	Package   string   // package_name
	FQN       []string // fully qualified name: package, directories, name (and version)
	Tags      []string
	Path      string   // original_file_path, relative to the project
	PatchPath string   // the schema file that documents it, relative to its project
	DependsOn []string // depends_on.nodes: unique ids of its parents
	versioned bool
}

// GraphNode is a manifest node other than a model or a test.
type GraphNode struct {
	UniqueID string
	Node     NodeInfo
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
	Version      string         // dbt 1.5+ model version ("" when the model is not versioned)
	Latest       string         // the model's latest_version
	Err          string         // a problem found while reading the node (the model becomes a warning)
	Node         NodeInfo       // what model selection reads
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
	Model    Ref    // the tested model
	ModelID  string // the tested model's unique id (attached_node), when the manifest has it
	Column   string
	ToModel  Ref    // relationships: the referenced model ("" name for a source)
	ToColumn string // relationships: the referenced column
}

// SemanticModel is a MetricFlow semantic model (dbt 1.6+).
type SemanticModel struct {
	Name           string
	Model          Ref    // the dbt model it reads: ref('…') or ref('…', v=N)
	ModelID        string // the model's unique id (depends_on), when the manifest has it
	Description    string
	DefaultAggTime string // defaults.agg_time_dimension
	Entities       []SMEntity
	Dimensions     []SMDimension
	Measures       []SMMeasure
}

// Ref names a dbt model as ref() does: its name and, for a versioned model, a version
// ("" for the latest).
type Ref struct {
	Name    string
	Version string
}

// SMEntity is an entity of a semantic model.
type SMEntity struct {
	Name string
	Type string // primary, unique, foreign, natural
	Expr string
}

// SMDimension is a dimension of a semantic model.
type SMDimension struct {
	Name        string
	Type        string // categorical or time
	Expr        string
	Description string
	Label       string
	Granularity string // time: type_params.time_granularity
}

// SMMeasure is a measure of a semantic model (or the aggregation of a simple metric
// defined without one, dbt 1.12's metric_aggregation_params).
type SMMeasure struct {
	Name        string
	Agg         string
	Expr        string
	Description string
	Label       string
	Percentile  float64
	Discrete    bool   // agg_params.use_discrete_percentile
	AggTime     string // agg_time_dimension ("" for the semantic model's default)
	NonAdditive string // non_additive_dimension.name ("" when additive)
}

// Metric is a MetricFlow metric.
type Metric struct {
	Name        string
	Label       string
	Description string
	Type        string // simple, ratio, derived, cumulative, conversion
	Filters     []string
	// simple and cumulative: the input measure (or, for a cumulative metric of dbt
	// 1.9+, Cumulative names an input metric instead).
	Measure    *MeasureInput
	Cumulative *MetricInput
	// simple, dbt 1.12: the aggregation of a metric defined without a measure
	// (metric_aggregation_params), with Expr as its expression.
	Agg         *SMMeasure
	AggModel    string // the semantic model of Agg
	Numerator   *MetricInput
	Denominator *MetricInput
	Expr        string
	Inputs      []MetricInput // derived
	Window      *TimeWindow   // cumulative: a trailing window
	GrainToDate string        // cumulative: grain_to_date
	PeriodAgg   string        // cumulative: first (default), last, average
}

// MeasureInput is a metric's input measure.
type MeasureInput struct {
	Name            string
	Filters         []string
	FillNullsWith   *float64
	JoinToTimespine bool
}

// MetricInput is a metric's input metric.
type MetricInput struct {
	Name          string
	Alias         string
	Filters       []string
	OffsetWindow  *TimeWindow
	OffsetToGrain string
}

// TimeWindow is a MetricFlow window: count units of granularity.
type TimeWindow struct {
	Count       int
	Granularity string
}

// SavedQuery is a MetricFlow saved query (dbt 1.7+).
type SavedQuery struct {
	Name        string
	Label       string
	Description string
	Metrics     []string
	GroupBy     []string
	Where       []string
	Limit       *int
}

// LegacyMetric is a metric of dbt 1.3 to 1.5 (manifests v7 to v9), before MetricFlow.
type LegacyMetric struct {
	Name        string
	Label       string
	Description string
	Method      string // calculation_method: count, count_distinct, sum, average, min, max, median, derived, expression
	Expression  string
	Timestamp   string
	TimeGrains  []string
	Dimensions  []string
	Filters     []LegacyFilter
	Window      *TimeWindow
	Model       Ref
	ModelID     string
	Meta        map[string]any
}

// LegacyFilter is a legacy metric's filter: field operator value, as SQL.
type LegacyFilter struct {
	Field    string
	Operator string
	Value    string
}

// Errors that fail a whole job (a bad model is only a warning).
var (
	ErrNotJSON     = errors.New("manifest is not valid JSON")
	ErrNoNodes     = errors.New("manifest has no nodes")
	ErrNotManifest = errors.New("manifest is not a JSON object")
	// ErrUnsupportedVersion names a manifest schema version outside v7 to v12 and v20.
	ErrUnsupportedVersion = errors.New("unsupported manifest schema version")
)
