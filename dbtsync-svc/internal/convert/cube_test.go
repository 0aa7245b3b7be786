package convert_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/devstack/cubecompiler"
)

// compileBuild converts p and compiles the files with Cube's schema compiler, failing on
// any compile error.
func compileBuild(t *testing.T, cc *cubecompiler.Compiler, p *convert.Project) (convert.Result, cubecompiler.Result) {
	t.Helper()
	res := convert.Build(p)
	files := map[string]string{}
	for _, f := range res.Files {
		files[f.Path] = f.Content
	}
	out := cc.CompileFiles(t, files)
	if len(out.Errors) > 0 {
		var all strings.Builder
		for _, f := range res.Files {
			all.WriteString("--- " + f.Path + "\n" + f.Content)
		}
		t.Fatalf("Cube's schema compiler refused the converter's output: %s\n%s", out, all.String())
	}
	if len(out.Cubes) != len(res.Files) {
		t.Fatalf("%d files compiled into %d cubes", len(res.Files), len(out.Cubes))
	}
	return res, out
}

// The reserved member names are the compiler's own, not a list from memory.
func TestReservedNamesMatchCube(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	got, want := convert.ReservedMemberNames(), cc.ReservedNames(t)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reserved.go lists %v\nCube %s reserves %v\nregenerate reserved.go from devstack/cubecompiler/reserved.js", got, cubecompiler.Version, want)
	}
}

// Every real manifest converts into files Cube compiles (three of these did not: a column
// named sql became a dimension named sql).
func TestCubeCompilesEveryFixtureManifest(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	dir := fixturesDir(t)
	entries, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(entries) == 0 {
		t.Fatal("no fixture manifests")
	}
	for _, path := range entries {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			p, err := convert.DecodeManifest(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			_, out := compileBuild(t, cc, p)
			if strings.Contains(path, "v12-dbt-1.8") {
				c := out.Cubes["customers"]
				if c.SQLTable != "`your-project`.`jaffle_shop`.`customers`" {
					t.Errorf("BigQuery sql_table %q, want dbt's relation_name", c.SQLTable)
				}
			}
		})
	}
}

// adapterManifest is a small manifest of one adapter with the cases real warehouses have.
func adapterManifest(t *testing.T, adapter string, nodes map[string]any) *convert.Project {
	t.Helper()
	m := map[string]any{"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json", "adapter_type": adapter}, "nodes": nodes}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p, err := convert.DecodeManifest(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func node(name string, relation any, db, schema string, cols []map[string]any, extra map[string]any) map[string]any {
	columns := map[string]any{}
	for _, c := range cols {
		columns[c["name"].(string)] = c
	}
	n := map[string]any{"resource_type": "model", "name": name, "alias": name, "database": db, "schema": schema,
		"unique_id": "model.p." + name, "columns": columns, "relation_name": relation,
		"config": map[string]any{"materialized": "table", "enabled": true}}
	for k, v := range extra {
		n[k] = v
	}
	return n
}

func col(name, typ string, extra ...any) map[string]any {
	c := map[string]any{"name": name, "data_type": typ}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

func relTest(name, model, column, to, field string) map[string]any {
	return map[string]any{"resource_type": "test", "name": name, "column_name": column, "attached_node": "model.p." + model,
		"refs":          []any{map[string]any{"name": model}},
		"test_metadata": map[string]any{"name": "relationships", "kwargs": map[string]any{"to": "ref('" + to + "')", "field": field}}}
}

func keyTest(name, kind, model, column string) map[string]any {
	return map[string]any{"resource_type": "test", "name": name, "column_name": column, "attached_node": "model.p." + model,
		"refs": []any{map[string]any{"name": model}}, "test_metadata": map[string]any{"name": kind, "kwargs": map[string]any{}}}
}

type wantDim struct {
	cube, member, sql, typ, title string
	pk                            bool
}

func checkDims(t *testing.T, out cubecompiler.Result, wants []wantDim) {
	t.Helper()
	for _, w := range wants {
		c, ok := out.Cubes[w.cube]
		if !ok {
			t.Errorf("no cube %q among %v", w.cube, keys(out.Cubes))
			continue
		}
		d, ok := c.Dimensions[w.member]
		if !ok {
			t.Errorf("cube %q has no dimension %q: %v", w.cube, w.member, keys(c.Dimensions))
			continue
		}
		if d.SQL != w.sql || d.Type != w.typ || d.PrimaryKey != w.pk || (w.title != "" && d.Title != w.title) {
			t.Errorf("%s.%s = sql %q type %s pk %v title %q; want sql %q type %s pk %v title %q",
				w.cube, w.member, d.SQL, d.Type, d.PrimaryKey, d.Title, w.sql, w.typ, w.pk, w.title)
		}
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestCubeCompilesPostgresProject(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	p := adapterManifest(t, "postgres", map[string]any{
		"model.p.orders": node("orders", `"analytics"."public"."orders"`, "analytics", "public", []map[string]any{
			col("id", "integer"), col("line", "integer"), col("Order Date", "timestamp with time zone"),
			col("2fa_enabled", "boolean"), col("Email", "character varying(255)"), col("sql", "text"),
			col("select", "text"), col("kept", "text", "quote", true), col("tags", "integer[]"),
			col("amount", "numeric(10,2)", "description", `Amount in {currency}, see C:\docs`, "meta", map[string]any{"unit": "EUR", "nested": map[string]any{"a": map[string]any{"b": 1}}}),
			col("Order_Date", "date"),
		}, map[string]any{"constraints": []any{map[string]any{"type": "primary_key", "columns": []any{"id", "line"}}}}),
	})
	_, out := compileBuild(t, cc, p)
	if got := out.Cubes["orders"].SQLTable; got != `"analytics"."public"."orders"` {
		t.Errorf("sql_table %q, want the relation_name", got)
	}
	checkDims(t, out, []wantDim{
		{"orders", "id", `{CUBE}.id`, "number", "", true},
		{"orders", "line", `{CUBE}.line`, "number", "", true},
		{"orders", "order_date", `{CUBE}."Order Date"`, "time", "Order Date", false},
		{"orders", "_2fa_enabled", `{CUBE}."2fa_enabled"`, "boolean", "2fa_enabled", false},
		{"orders", "Email", `{CUBE}."Email"`, "string", "", false},
		{"orders", "sql_col", `{CUBE}.sql`, "string", "sql", false},
		{"orders", "select", `{CUBE}."select"`, "string", "", false},
		{"orders", "kept", `{CUBE}."kept"`, "string", "", false},
		{"orders", "tags", `{CUBE}.tags`, "string", "", false},
		{"orders", "amount", `{CUBE}.amount`, "number", "", false},
		{"orders", "Order_Date", `{CUBE}."Order_Date"`, "time", "", false},
	})
	amount := out.Cubes["orders"].Dimensions["amount"]
	if amount.Description != `Amount in (currency), see C:\docs` || amount.Meta["unit"] != "EUR" {
		t.Errorf("description %q meta %v: want the text (braces as parentheses, the backslash kept) and the meta", amount.Description, amount.Meta)
	}
}

func TestCubeCompilesSnowflakeProject(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	p := adapterManifest(t, "snowflake", map[string]any{
		"model.p.sf_orders": node("sf_orders", `ANALYTICS.PUBLIC."SF_Orders"`, "ANALYTICS", "PUBLIC", []map[string]any{
			col("order_id", "NUMBER(38,0)", "constraints", []any{map[string]any{"type": "primary_key"}}),
			col("CUSTOMER_ID", "NUMBER(38,0)"), col("Email", "VARCHAR(16777216)"), col("placed_at", "TIMESTAMP_NTZ(9)"),
			col("payload", "VARIANT"), col("ratio", "FLOAT"),
		}, nil),
		"model.p.no_relation": node("no_relation", nil, "ANALYTICS", "Mixed Schema", []map[string]any{col("ID", "NUMBER")}, nil),
	})
	_, out := compileBuild(t, cc, p)
	if got := out.Cubes["sf_orders"].SQLTable; got != `ANALYTICS.PUBLIC."SF_Orders"` {
		t.Errorf("sql_table %q, want the relation_name with its quotes and case", got)
	}
	if got := out.Cubes["no_relation"].SQLTable; got != `ANALYTICS."Mixed Schema".no_relation` {
		t.Errorf("sql_table without relation_name %q", got)
	}
	checkDims(t, out, []wantDim{
		{"sf_orders", "order_id", `{CUBE}.order_id`, "number", "", true},
		{"sf_orders", "CUSTOMER_ID", `{CUBE}.CUSTOMER_ID`, "number", "", false},
		{"sf_orders", "Email", `{CUBE}."Email"`, "string", "", false},
		{"sf_orders", "placed_at", `{CUBE}.placed_at`, "time", "", false},
		{"sf_orders", "payload", `{CUBE}.payload`, "string", "", false},
	})
}

func TestCubeCompilesBigQueryProject(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	p := adapterManifest(t, "bigquery", map[string]any{
		"model.p.customers": node("customers", "`your-project`.`jaffle_shop`.`customers`", "your-project", "jaffle_shop", []map[string]any{
			col("customer_id", "INT64", "tags", []any{"primary_key"}), col("Order Date", "DATE"), col("address", "STRUCT<street STRING, zip INT64>"),
			col("emails", "ARRAY<STRING>"), col("score", "BIGNUMERIC(40,2)"), col("order", "STRING"),
		}, nil),
		"model.p.bq-events": node("bq-events", nil, "your-project", "events", []map[string]any{col("event_id", "STRING")}, nil),
	})
	_, out := compileBuild(t, cc, p)
	if got := out.Cubes["customers"].SQLTable; got != "`your-project`.`jaffle_shop`.`customers`" {
		t.Errorf("sql_table %q", got)
	}
	if got := out.Cubes["bq_events"].SQLTable; got != "`your-project`.`events`.`bq-events`" {
		t.Errorf("bq-events sql_table %q", got)
	}
	checkDims(t, out, []wantDim{
		{"customers", "customer_id", "{CUBE}.customer_id", "number", "", true},
		{"customers", "order_date", "{CUBE}.`Order Date`", "time", "Order Date", false},
		{"customers", "address", "{CUBE}.address", "string", "", false},
		{"customers", "emails", "{CUBE}.emails", "string", "", false},
		{"customers", "score", "{CUBE}.score", "number", "", false},
		{"customers", "order_col", "{CUBE}.`order`", "string", "order", false},
	})
}

func TestCubeCompilesRedshiftProject(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	p := adapterManifest(t, "redshift", map[string]any{
		"model.p.orders": node("orders", nil, "dev", "public", []map[string]any{
			col("id", "bigint"), col("status", "character varying(256)"), col("total", "double precision"),
			col("placed_at", "timestamp without time zone"), col("doc", "super"),
		}, nil),
		"test.p.u":  keyTest("u", "unique", "orders", "id"),
		"test.p.nn": keyTest("nn", "not_null", "orders", "id"),
	})
	_, out := compileBuild(t, cc, p)
	if got := out.Cubes["orders"].SQLTable; got != `"dev"."public"."orders"` {
		t.Errorf("sql_table %q, want dbt's default quoting", got)
	}
	checkDims(t, out, []wantDim{
		{"orders", "id", "{CUBE}.id", "number", "", true},
		{"orders", "status", "{CUBE}.status", "string", "", false},
		{"orders", "total", "{CUBE}.total", "number", "", false},
		{"orders", "placed_at", "{CUBE}.placed_at", "time", "", false},
		{"orders", "doc", "{CUBE}.doc", "string", "", false},
	})
}

func TestCubeCompilesDuckDBProject(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	p := adapterManifest(t, "duckdb", map[string]any{
		"model.p.events": node("events", `"memory"."main"."events"`, "memory", "main", []map[string]any{
			col("id", "HUGEINT"), col("labels", "VARCHAR[]"), col("at", "TIMESTAMP WITH TIME ZONE"), col("user", "VARCHAR"), col("Type", "VARCHAR"),
		}, map[string]any{"constraints": []any{map[string]any{"type": "primary_key", "columns": []any{"id"}}}}),
	})
	_, out := compileBuild(t, cc, p)
	checkDims(t, out, []wantDim{
		{"events", "id", "{CUBE}.id", "number", "", true},
		{"events", "labels", "{CUBE}.labels", "string", "", false},
		{"events", "at", `{CUBE}.at`, "time", "", false},
		{"events", "user", `{CUBE}."user"`, "string", "", false},
		{"events", "Type", `{CUBE}."Type"`, "string", "", false},
	})
}

func TestCubeCompilesDatabricksProjectWithJoins(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	p := adapterManifest(t, "databricks", map[string]any{
		"model.p.orders": node("orders", "`main`.`default`.`orders`", "main", "default", []map[string]any{
			col("order_id", "BIGINT", "tags", []any{"primary_key"}), col("Customer ID", "BIGINT"), col("2fa_enabled", "BOOLEAN"),
			col("attrs", "MAP<STRING,INT>"), col("amount", "DECIMAL(10,2)"),
		}, nil),
		"model.p.customers": node("customers", "`main`.`default`.`customers`", "main", "default", []map[string]any{
			col("id", "BIGINT", "constraints", []any{map[string]any{"type": "primary_key"}}),
		}, nil),
		"model.p.keyless": node("keyless", "`main`.`default`.`keyless`", "main", "default", []map[string]any{col("x", "STRING")}, nil),
		"test.p.rel":      relTest("rel", "orders", "Customer ID", "customers", "id"),
		"test.p.rel2":     relTest("rel2", "orders", "order_id", "keyless", "x"),
	})
	res, out := compileBuild(t, cc, p)
	checkDims(t, out, []wantDim{
		{"orders", "order_id", "{CUBE}.order_id", "number", "", true},
		{"orders", "customer_id", "{CUBE}.`Customer ID`", "number", "Customer ID", false},
		{"orders", "_2fa_enabled", "{CUBE}.`2fa_enabled`", "boolean", "2fa_enabled", false},
		{"orders", "attrs", "{CUBE}.attrs", "string", "", false},
		{"orders", "amount", "{CUBE}.amount", "number", "", false},
	})
	if got := out.Cubes["orders"].Joins["customers"].SQL; got != "{CUBE}.`Customer ID` = {customers}.id" {
		t.Errorf("join SQL %q", got)
	}
	if _, ok := out.Cubes["orders"].Joins["keyless"]; ok {
		t.Error("a join to a cube without a primary key was kept; Cube refuses it")
	}
	found := false
	for _, w := range res.Warnings {
		found = found || strings.Contains(w.Message, `join to "keyless" left out`)
	}
	if !found {
		t.Errorf("no warning for the join left out: %v", res.Warnings)
	}
}
