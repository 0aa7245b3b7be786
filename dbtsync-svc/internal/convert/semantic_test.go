package convert_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/devstack/cubecompiler"
)

// The manifests under testdata/semantic are written in dbt's own shape (each validates
// against dbt's published manifest schema of its version; see the README there): a v12
// one with every MetricFlow metric type, filters, offsets, windows, grain-to-date, a
// versioned model and entities across three semantic models, and a v8 one with the
// metrics of dbt 1.3-1.5.
func decodeTestdata(t *testing.T, name string) *convert.Project {
	t.Helper()
	return decodeFile(t, filepath.Join("testdata", "semantic", name))
}

// decodeFile decodes the manifest at path.
func decodeFile(t *testing.T, path string) *convert.Project {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := convert.DecodeManifest(f)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return p
}

// compiled is each testdata manifest converted and compiled once per test process (a
// compile takes seconds; the result depends only on the manifest).
var compiled struct {
	sync.Mutex
	res map[string]convert.Result
	out map[string]cubecompiler.Result
}

func compileTestdata(t *testing.T, name string) (convert.Result, cubecompiler.Result) {
	t.Helper()
	cc := cubecompiler.Ensure(t)
	compiled.Lock()
	defer compiled.Unlock()
	if out, ok := compiled.out[name]; ok {
		return compiled.res[name], out
	}
	res, out := compileBuild(t, cc, decodeTestdata(t, name))
	if compiled.out == nil {
		compiled.res, compiled.out = map[string]convert.Result{}, map[string]cubecompiler.Result{}
	}
	compiled.res[name], compiled.out[name] = res, out
	return res, out
}

// wantMeasure is a compiled member and what MetricFlow's definition means it to be.
type wantMeasure struct {
	metric, cube, member string
	typ, sql             string
	filters              []string
	rolling              *cubecompiler.RollingWindow
	multiStage           bool
	shift                []cubecompiler.TimeShift
	hidden               bool
}

func checkMeasure(t *testing.T, out cubecompiler.Result, w wantMeasure) {
	t.Helper()
	c, ok := out.Cubes[w.cube]
	if !ok {
		t.Fatalf("no cube %q among %v", w.cube, keys(out.Cubes))
	}
	m, ok := c.Measures[w.member]
	if !ok {
		t.Fatalf("cube %q has no measure %q: %v", w.cube, w.member, keys(c.Measures))
	}
	if m.Type != w.typ || m.SQL != w.sql {
		t.Errorf("%s.%s = %s %q, want %s %q", w.cube, w.member, m.Type, m.SQL, w.typ, w.sql)
	}
	if !reflect.DeepEqual(m.Filters, w.filters) {
		t.Errorf("%s.%s filters = %q, want %q", w.cube, w.member, m.Filters, w.filters)
	}
	if !reflect.DeepEqual(m.RollingWindow, w.rolling) {
		t.Errorf("%s.%s rolling_window = %+v, want %+v", w.cube, w.member, m.RollingWindow, w.rolling)
	}
	if m.MultiStage != w.multiStage || !reflect.DeepEqual(m.TimeShift, w.shift) {
		t.Errorf("%s.%s multi_stage %v time_shift %+v, want %v %+v", w.cube, w.member, m.MultiStage, m.TimeShift, w.multiStage, w.shift)
	}
	if m.Public == w.hidden {
		t.Errorf("%s.%s public = %v, want %v", w.cube, w.member, m.Public, !w.hidden)
	}
}

// Every MetricFlow metric that Cube can express compiles into the member that computes
// what MetricFlow computes; each case says what the metric means.
func TestMetricFlowMetricsCompileToWhatTheyMean(t *testing.T) {
	_, out := compileTestdata(t, "manifest-v12-semantic.json")
	day := func(interval string) []cubecompiler.TimeShift {
		return []cubecompiler.TimeShift{{Interval: interval, Type: "prior", TimeDimension: "orders.ordered_at"}}
	}
	for _, w := range []wantMeasure{
		// simple: SUM(1) over orders.
		{metric: "orders", cube: "orders", member: "orders", typ: "sum", sql: "1"},
		// simple named like its measure: the measure itself (renamed: a column has the name).
		{metric: "order_total", cube: "orders", member: "order_total_sum", typ: "sum", sql: "{CUBE}.order_total"},
		// simple over a semantic model whose model is the latest version of customers.
		{metric: "customers", cube: "customers", member: "customers", typ: "countDistinct", sql: "{CUBE}.customer_id"},
		// simple with a filter on the semantic model's own dimension (expr order_total).
		{metric: "large_orders", cube: "orders", member: "large_orders", typ: "sum", sql: "1", filters: []string{"{CUBE}.order_total >= 20"}},
		// simple with a filter on a joined entity's dimension: MetricFlow joins orders to
		// customers on the customer entity; Cube joins orders to customers too.
		{metric: "emea_orders", cube: "orders", member: "emea_orders", typ: "sum", sql: "1", filters: []string{"{customers.region} = 'EMEA'"}},
		// the input measure's filter and the metric's both hold.
		{metric: "completed_food_orders", cube: "orders", member: "completed_food_orders", typ: "sum", sql: "1",
			filters: []string{"{CUBE}.is_food_order = true", "{CUBE}.status = 'completed'"}},
		// a percentile is not narrowed by Cube's filters: the condition goes inside it, on
		// metric_time (the measure's agg_time_dimension ordered_at).
		{metric: "recent_median_order", cube: "orders", member: "recent_median_order", typ: "number",
			sql: "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY CASE WHEN ({CUBE}.ordered_at >= '2024-01-01') THEN {CUBE}.order_total END)"},
		{metric: "p90_order", cube: "orders", member: "p90_order", typ: "number", sql: "PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY {CUBE}.order_total)"},
		// sum_boolean: the count of rows where the expression is true.
		{metric: "food_orders", cube: "orders", member: "food_orders", typ: "sum", sql: "CASE WHEN {CUBE}.is_food_order THEN 1 ELSE 0 END"},
		// fill_nulls_with: COALESCE(metric, 0), over the aggregation kept hidden.
		{metric: "daily_orders", cube: "orders", member: "daily_orders", typ: "number", sql: "COALESCE({daily_orders_unfilled}, 0)"},
		{metric: "daily_orders", cube: "orders", member: "daily_orders_unfilled", typ: "sum", sql: "1", hidden: true},
		{metric: "order_total_filled", cube: "orders", member: "order_total_filled", typ: "number", sql: "COALESCE({order_total_filled_unfilled}, 0)"},
		// a metric without a measure (metric_aggregation_params): COUNT(expr), with a filter.
		{metric: "returned_orders", cube: "orders", member: "returned_orders", typ: "count", sql: "case when status = 'returned' then 1 end"},
		{metric: "returned_food_orders", cube: "orders", member: "returned_food_orders", typ: "count", sql: "case when status = 'returned' then 1 end",
			filters: []string{"{CUBE}.is_food_order"}},
		// ratio with a numerator filter: SUM(1) WHERE food / SUM(1).
		{metric: "food_order_share", cube: "orders", member: "food_order_share", typ: "number", sql: "1.0 * {food_order_share_food} / NULLIF({orders}, 0)"},
		{metric: "food_order_share", cube: "orders", member: "food_order_share_food", typ: "sum", sql: "1", filters: []string{"{CUBE}.is_food_order = true"}, hidden: true},
		// ratio with a metric filter and a filter on each side: the metric's applies to both.
		{metric: "completed_share_emea", cube: "orders", member: "completed_share_emea", typ: "number",
			sql: "1.0 * {completed_share_emea_numerator} / NULLIF({completed_share_emea_denominator}, 0)"},
		{metric: "completed_share_emea", cube: "orders", member: "completed_share_emea_numerator", typ: "sum", sql: "1",
			filters: []string{"{CUBE}.status = 'completed'", "{customers.region} = 'EMEA'"}, hidden: true},
		{metric: "completed_share_emea", cube: "orders", member: "completed_share_emea_denominator", typ: "sum", sql: "1",
			filters: []string{"{CUBE}.status != 'cancelled'", "{customers.region} = 'EMEA'"}, hidden: true},
		// ratio across semantic models: each side aggregated on its own and joined on the
		// query's dimensions (MetricFlow's plan), which is what a multi-stage measure is.
		{metric: "revenue_per_customer", cube: "order_items", member: "revenue_per_customer", typ: "number",
			sql: "1.0 * {revenue} / NULLIF({customers.customers}, 0)", multiStage: true},
		// derived across semantic models.
		{metric: "order_gross_profit", cube: "order_items", member: "order_gross_profit", typ: "number", sql: "{revenue} - {orders.tax}", multiStage: true},
		// derived with an offset_window: the input one month before (time_shift prior on
		// the measure's agg_time_dimension).
		{metric: "revenue_growth_mom", cube: "order_items", member: "revenue_growth_mom", typ: "number",
			sql: "({revenue} - {revenue_growth_mom_revenue_prev_month}) * 100 / nullif({revenue_growth_mom_revenue_prev_month}, 0)", multiStage: true},
		{metric: "revenue_growth_mom", cube: "order_items", member: "revenue_growth_mom_revenue_prev_month", typ: "number", sql: "{revenue}", multiStage: true,
			shift: []cubecompiler.TimeShift{{Interval: "1 month", Type: "prior", TimeDimension: "order_items.ordered_at"}}, hidden: true},
		// derived with filtered inputs, one of them a week before.
		{metric: "orders_wow", cube: "orders", member: "orders_wow", typ: "number", sql: "{orders_wow_orders} - {orders_wow_orders_last_week}", multiStage: true},
		{metric: "orders_wow", cube: "orders", member: "orders_wow_orders_last_week", typ: "number", sql: "{orders_wow_orders_last_week_unshifted}",
			multiStage: true, shift: day("1 week"), hidden: true},
		{metric: "orders_wow", cube: "orders", member: "orders_wow_orders_last_week_unshifted", typ: "sum", sql: "1",
			filters: []string{"{CUBE}.status = 'completed'"}, hidden: true},
		// derived over a derived and a ratio.
		{metric: "share_of_profit", cube: "order_items", member: "share_of_profit", typ: "number", sql: "{order_gross_profit} * {orders.food_order_share}", multiStage: true},
		// cumulative without a window: all time up to each period.
		{metric: "cumulative_revenue", cube: "order_items", member: "cumulative_revenue", typ: "sum", sql: "{CUBE}.product_price",
			rolling: &cubecompiler.RollingWindow{Trailing: "unbounded"}},
		// cumulative with a window (dbt 1.6-1.8: type_params.window; 1.9+: cumulative_type_params).
		{metric: "revenue_7d", cube: "order_items", member: "revenue_7d", typ: "sum", sql: "{CUBE}.product_price", rolling: &cubecompiler.RollingWindow{Trailing: "7 day"}},
		{metric: "orders_30d", cube: "orders", member: "orders_30d", typ: "sum", sql: "1", rolling: &cubecompiler.RollingWindow{Trailing: "30 day"}},
		// grain_to_date: from the start of the month (year) to each period.
		{metric: "revenue_mtd", cube: "order_items", member: "revenue_mtd", typ: "sum", sql: "{CUBE}.product_price",
			rolling: &cubecompiler.RollingWindow{Type: "to_date", Granularity: "month"}},
		{metric: "food_orders_ytd", cube: "orders", member: "food_orders_ytd", typ: "sum", sql: "1", filters: []string{"{CUBE}.is_food_order = true"},
			rolling: &cubecompiler.RollingWindow{Type: "to_date", Granularity: "year"}},
		// cumulative over an input metric (cumulative_type_params.metric).
		{metric: "customers_to_date", cube: "customers", member: "customers_to_date", typ: "countDistinct", sql: "{CUBE}.customer_id",
			rolling: &cubecompiler.RollingWindow{Trailing: "unbounded"}},
	} {
		t.Run(w.metric+"/"+w.member, func(t *testing.T) { checkMeasure(t, out, w) })
	}
}

// The job's warnings name every metric not converted, and why; a metric converted with
// less than MetricFlow gives says so too.
func TestMetricFlowWarningsNameEveryMetricNotConverted(t *testing.T) {
	res := convert.Build(decodeTestdata(t, "manifest-v12-semantic.json"))
	var got []string
	for _, w := range res.Warnings {
		if strings.HasPrefix(w.Model, "metric.") || strings.HasPrefix(w.Model, "saved_query.") || strings.Contains(w.Message, "semantic model") {
			got = append(got, w.Model+": "+w.Message)
		}
	}
	want := []string{
		`model.shop.orders: measure "open_balance" of semantic model "orders" skipped: its non_additive_dimension "ordered_at" makes it semi-additive (one value per ordered_at, chosen per query grain), which no Cube measure type computes`,
		`metric.daily_orders: metric converted without join_to_timespine: Cube gives no row for a period without data, where MetricFlow gives one (null, or fill_nulls_with)`,
		`metric.open_balance: metric skipped: its measure "open_balance" is not converted: its non_additive_dimension "ordered_at" makes it semi-additive (one value per ordered_at, chosen per query grain), which no Cube measure type computes`,
		`metric.status_filtered_by_revenue: metric skipped: a filter on a metric's value (Metric('revenue', group_by=['order'])) has no Cube equivalent inside a measure`,
		`metric.order_conversion: metric skipped: a conversion metric counts base events followed by a conversion event of the same entity within a window, which no Cube measure expresses`,
		`metric.revenue_avg_7d: metric skipped: period_agg "average" (the average of the cumulative values in each period of a coarser grain) has no Cube equivalent`,
		`metric.revenue_vs_month_start: metric skipped: its input "revenue" is offset to the start of its month (offset_to_grain), which Cube's time_shift (an interval) does not express`,
		`metric.uses_unknown_word: metric skipped: its expression "revenue * exchange_rate" names "exchange_rate", which is none of its inputs`,
		`saved_query.customer_revenue: metric "order_conversion" left out of the view: it is not converted`,
		`saved_query.customer_revenue: where filter "{{ Dimension('customer__region') }} = 'EMEA' or {{ Dimension('customer__region') }} = 'APAC'" left out of the view (a view's default filter is one dimension compared with constants): it is not of that form`,
		`saved_query.customer_revenue: limit 10 left out of the view: a view has no row limit`,
		`saved_query.customers_and_revenue: saved query skipped: no join leads from cube "customers" (its first metric's) to cube "order_items"`,
		`saved_query.orders_by_segment: group by Dimension('customer__nickname') left out of the view: dimension "nickname" is not a dimension of entity "customer"`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A versioned model is one cube per version: the cube named for the model reads the
// relation of its latest_version (2, though a prerelease 3 exists); the others are
// <model>_v<N>; a ref pinned to a version joins that version's cube, an unpinned one the
// latest.
func TestVersionedModelsBecomeACubePerVersion(t *testing.T) {
	_, out := compileTestdata(t, "manifest-v12-semantic.json")
	for cube, table := range map[string]string{
		"customers":    `"analytics"."marts"."customers_v2"`,
		"customers_v1": `"analytics"."marts"."customers_v1"`,
		"customers_v3": `"analytics"."marts"."customers_v3"`,
	} {
		if got := out.Cubes[cube].SQLTable; got != table {
			t.Errorf("cube %s reads %q, want %q", cube, got, table)
		}
	}
	if _, ok := out.Cubes["customers_v2"]; ok {
		t.Error("the latest version has a _v2 cube besides the cube named for the model")
	}
	joins := map[string]cubecompiler.Join{
		"customer_segments.customers_v3": {SQL: "{CUBE}.customer_id = {customers_v3}.customer_id", Relationship: "belongsTo"}, // ref('customers', v=3)
		"orders.customers":               {SQL: "{CUBE}.customer_id = {customers}.customer_id", Relationship: "belongsTo"},    // ref('customers'), and the customer entity
	}
	for path, want := range joins {
		from, to, _ := strings.Cut(path, ".")
		if got := out.Cubes[from].Joins[to]; got != want {
			t.Errorf("join %s = %+v, want %+v", path, got, want)
		}
	}
	if d := out.Cubes["customers_v1"].Dimensions["customer_id"]; !d.PrimaryKey {
		t.Error("customers_v1 lost its primary key (dbt's primary_key of that version)")
	}
}

// Entities join the semantic models' cubes as MetricFlow joins them: a foreign entity to
// where it is primary or unique (many_to_one), a primary entity to where it is unique and
// back (one_to_one); never from a primary entity to a foreign one.
func TestEntitiesBecomeJoins(t *testing.T) {
	_, out := compileTestdata(t, "manifest-v12-semantic.json")
	for path, want := range map[string]cubecompiler.Join{
		"order_items.orders":             {SQL: "{CUBE}.order_id = {orders}.order_id", Relationship: "belongsTo"},
		"orders.customer_segments":       {SQL: "{CUBE}.customer_id = {customer_segments}.customer_id", Relationship: "belongsTo"},
		"customers.customer_segments":    {SQL: "{CUBE}.customer_id = {customer_segments}.customer_id", Relationship: "hasOne"},
		"customer_segments.customers":    {SQL: "{CUBE}.customer_id = {customers}.customer_id", Relationship: "hasOne"},
		"customer_segments.customers_v3": {SQL: "{CUBE}.customer_id = {customers_v3}.customer_id", Relationship: "belongsTo"}, // the relationships test
	} {
		from, to, _ := strings.Cut(path, ".")
		if got := out.Cubes[from].Joins[to]; got != want {
			t.Errorf("join %s = %+v, want %+v", path, got, want)
		}
	}
	for from, to := range map[string]string{"orders": "order_items", "customers": "orders"} {
		if _, ok := out.Cubes[from].Joins[to]; ok {
			t.Errorf("join %s -> %s: from a primary entity to a foreign one (a fan-out MetricFlow never makes)", from, to)
		}
	}
	if d := out.Cubes["customer_segments"].Dimensions["segment_key"]; d.SQL != "lower(segment)" {
		t.Errorf("the entity of an expression is a dimension of it: %+v", d)
	}
	for cube, key := range map[string]string{"orders": "order_id", "order_items": "order_item_id", "customers": "customer_id"} {
		if !out.Cubes[cube].Dimensions[key].PrimaryKey {
			t.Errorf("%s.%s is not the primary key (the primary entity)", cube, key)
		}
	}
	if d := out.Cubes["orders"].Dimensions["ordered_at"]; d.Type != "time" || d.Meta["time_granularity"] != "day" {
		t.Errorf("orders.ordered_at = %s %v, want a time dimension of day granularity", d.Type, d.Meta)
	}
	if m := out.Cubes["orders"].Measures["order_count"]; m.Meta["agg_time_dimension"] != "ordered_at" {
		t.Errorf("orders.order_count meta = %v, want its agg_time_dimension", m.Meta)
	}
}

// A saved query is a view rooted at the cube of its first metric, with its group-by
// dimensions (metric_time is the first metric's agg_time_dimension) and its where
// filters as default filters.
func TestSavedQueriesBecomeViews(t *testing.T) {
	_, out := compileTestdata(t, "manifest-v12-semantic.json")
	members := func(view string) map[string]string {
		m := map[string]string{}
		for _, in := range out.Cubes[view].Includes {
			m[in.Name] = in.MemberPath
		}
		return m
	}
	for view, want := range map[string]map[string]string{
		"order_summary": {"orders": "orders.orders", "order_total_sum": "orders.order_total_sum", "emea_orders": "orders.emea_orders",
			"ordered_at": "orders.ordered_at", "region": "customers.region", "status": "orders.status"},
		"revenue_and_orders": {"revenue": "order_items.revenue", "orders": "orders.orders", "revenue_per_customer": "order_items.revenue_per_customer",
			"region": "customers.region", "status": "orders.status"},
		"customer_revenue": {"revenue_per_customer": "order_items.revenue_per_customer", "customers": "customers.customers",
			"customer_id": "customers.customer_id", "customer_name": "customers.customer_name"},
		// customer__segment: the customer entity is unique in customer_segments, which
		// orders joins.
		"orders_by_segment": {"orders": "orders.orders", "segmented_customers": "customer_segments.segmented_customers", "segment": "customer_segments.segment"},
	} {
		if !out.Cubes[view].IsView {
			t.Errorf("%s is not a view", view)
		}
		if got := members(view); !reflect.DeepEqual(got, want) {
			t.Errorf("view %s includes %v, want %v", view, got, want)
		}
	}
	wantFilters := []cubecompiler.DefaultFilter{
		{Member: "order_summary.status", Operator: "equals", Values: []string{"completed"}},
		{Member: "order_summary.region", Operator: "equals", Values: []string{"EMEA", "APAC"}},
		{Member: "order_summary.ordered_at", Operator: "afterOrOnDate", Values: []string{"2024-01-01"}},
	}
	if got := out.Cubes["order_summary"].DefaultFilters; !reflect.DeepEqual(got, wantFilters) {
		t.Errorf("order_summary default filters = %+v, want %+v", got, wantFilters)
	}
	if _, ok := out.Cubes["customers_and_revenue"]; ok {
		t.Error("a saved query whose cubes no join connects became a view")
	}
}

// The metrics of dbt 1.3-1.5 (manifest v8 here) become measures of their model's cube
// the same way: the aggregation of the expression, its filters, a trailing window, a
// derived metric over the others.
func TestLegacyMetricsCompileToWhatTheyMean(t *testing.T) {
	res, out := compileTestdata(t, "manifest-v8-legacy-metrics.json")
	for _, w := range []wantMeasure{
		{metric: "order_count", cube: "orders", member: "order_count", typ: "count", sql: "{CUBE}.order_id"},
		{metric: "all_orders", cube: "orders", member: "all_orders", typ: "count"}, // expression *: COUNT(*)
		{metric: "completed_orders", cube: "orders", member: "completed_orders", typ: "count", sql: "{CUBE}.order_id", filters: []string{"{CUBE}.status = 'completed'"}},
		{metric: "customers_with_orders", cube: "orders", member: "customers_with_orders", typ: "countDistinct", sql: "{CUBE}.customer_id"},
		{metric: "revenue", cube: "orders", member: "revenue", typ: "sum", sql: "{CUBE}.amount", filters: []string{"{CUBE}.status != 'returned'", "{CUBE}.amount > 0"}},
		{metric: "average_order_amount", cube: "orders", member: "average_order_amount", typ: "avg", sql: "{CUBE}.amount"},
		{metric: "smallest_order", cube: "orders", member: "smallest_order", typ: "min", sql: "{CUBE}.amount"},
		{metric: "largest_order", cube: "orders", member: "largest_order", typ: "max", sql: "{CUBE}.amount"},
		{metric: "median_order_amount", cube: "orders", member: "median_order_amount", typ: "number",
			sql: "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY CASE WHEN ({CUBE}.status = 'completed') THEN {CUBE}.amount END)"},
		{metric: "mid_sized_orders", cube: "orders", member: "mid_sized_orders", typ: "count", sql: "{CUBE}.order_id", filters: []string{"{CUBE}.amount between 10 and 20"}},
		{metric: "revenue_7d", cube: "orders", member: "revenue_7d", typ: "sum", sql: "{CUBE}.amount", rolling: &cubecompiler.RollingWindow{Trailing: "7 day"}},
		// derived, with {{ metric('…') }} and with bare names (calculation_method expression, dbt 1.3).
		{metric: "average_revenue_per_order", cube: "orders", member: "average_revenue_per_order", typ: "number", sql: "{revenue} / {order_count}"},
		{metric: "completion_rate", cube: "orders", member: "completion_rate", typ: "number", sql: "{completed_orders} / nullif({order_count}, 0)"},
		// derived across two models' cubes (orders joins customers).
		{metric: "revenue_per_lifetime_customer", cube: "orders", member: "revenue_per_lifetime_customer", typ: "number",
			sql: "{revenue} / {customers.lifetime_customers}", multiStage: true},
		{metric: "lifetime_customers", cube: "customers", member: "lifetime_customers", typ: "countDistinct", sql: "{CUBE}.customer_id"},
	} {
		t.Run(w.metric, func(t *testing.T) { checkMeasure(t, out, w) })
	}
	if d := out.Cubes["orders"].Dimensions["order_date"]; d.Type != "time" {
		t.Errorf("the metrics' timestamp order_date is a %s dimension, want time", d.Type)
	}
	if m := out.Cubes["orders"].Measures["order_count"]; !reflect.DeepEqual(m.Meta["time_grains"], []any{"day", "week", "month"}) {
		t.Errorf("order_count meta = %v, want its time_grains", m.Meta)
	}
	var got []string
	for _, w := range res.Warnings {
		if strings.HasPrefix(w.Model, "metric.") {
			got = append(got, w.Model+": "+w.Message)
		}
	}
	want := []string{
		`metric.p95_order_amount: metric skipped: calculation_method "percentile" has no Cube measure type`,
		`metric.regex_orders: metric skipped: its filter operator "matches" is not one the data model can express`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
