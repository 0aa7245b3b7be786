package convert_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/devstack"
	yaml "go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func fixturesDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(devstack.RepoRoot(t), "..", "shared", "fixtures", "dbt")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("dbt fixtures missing at %s: clone the shared fixtures beside the repository (../shared/fixtures/dbt): %v", dir, err)
	}
	return dir
}

// golden renders a conversion as one reviewable text: every file, then the warnings.
func golden(res convert.Result) []byte {
	var b bytes.Buffer
	for _, f := range res.Files {
		b.WriteString("=== " + f.Path + "\n" + f.Content)
	}
	b.WriteString("=== warnings\n")
	for _, w := range res.Warnings {
		b.WriteString(w.Model + ": " + w.Message + "\n")
	}
	return b.Bytes()
}

// Every real manifest of ../shared/fixtures/dbt, and the semantic-layer ones of
// testdata/semantic, converts into exactly its golden file (regenerated with -update,
// reviewed in the diff); cmd/dbtconvert's test holds the files it writes to the same.
func TestConvertRealManifestsMatchGolden(t *testing.T) {
	fixtures, _ := filepath.Glob(filepath.Join(fixturesDir(t), "*.json"))
	own, _ := filepath.Glob(filepath.Join("testdata", "semantic", "*.json"))
	if len(fixtures) < 6 || len(own) < 2 {
		t.Fatalf("manifests missing: %v %v", fixtures, own)
	}
	// What each manifest is known to hold (a new fixture gets a golden file all the same).
	known := map[string]struct{ version, models int }{
		"manifest-v7-dbt-1.3": {7, 5}, "manifest-v8-dbt-1.4": {8, 5}, "manifest-v10-dbt-1.6": {10, 6},
		"manifest-v11-dbt-1.7": {11, 35}, "manifest-v12-dbt-1.8": {12, 36}, "manifest-v12-dbt-1.10": {12, 13},
		"manifest-v12-semantic": {12, 7}, "manifest-v8-legacy-metrics": {8, 5},
	}
	for _, manifest := range append(fixtures, own...) {
		name := strings.TrimSuffix(filepath.Base(manifest), ".json")
		t.Run(name, func(t *testing.T) {
			p := decodeFile(t, manifest)
			if k, ok := known[name]; ok && (p.SchemaVersion != k.version || len(p.Models) != k.models) {
				t.Errorf("schema version %d, %d models; want %d, %d", p.SchemaVersion, len(p.Models), k.version, k.models)
			}
			res := convert.Build(p)
			got := golden(res)
			path := filepath.Join("testdata", "golden", name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("golden file: %v (run go test -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("conversion differs from %s (review, then regenerate with -update)", path)
			}
			for _, f := range res.Files {
				assertCube(t, f)
			}
			if again := golden(convert.Build(p)); !bytes.Equal(again, got) {
				t.Error("conversion is not deterministic")
			}
		})
	}
}

// assertCube parses a generated file as YAML and checks the cube's shape (or the view's).
func assertCube(t *testing.T, f convert.File) {
	t.Helper()
	if strings.HasPrefix(f.Path, "model/views/") {
		assertView(t, f)
		return
	}
	var doc struct {
		Cubes []struct {
			Name       string `yaml:"name"`
			SQLTable   string `yaml:"sql_table"`
			Dimensions []struct {
				Name, SQL, Type string
			} `yaml:"dimensions"`
			Measures []struct {
				Name, Type string
			} `yaml:"measures"`
			Joins []struct {
				Name, SQL, Relationship string
			} `yaml:"joins"`
		} `yaml:"cubes"`
	}
	if err := yaml.Unmarshal([]byte(f.Content), &doc); err != nil {
		t.Fatalf("%s is not YAML: %v", f.Path, err)
	}
	if len(doc.Cubes) != 1 || "model/cubes/"+doc.Cubes[0].Name+".yml" != f.Path || doc.Cubes[0].SQLTable == "" {
		t.Fatalf("%s: not one cube named after its file with a sql_table: %+v", f.Path, doc.Cubes)
	}
	seen := map[string]bool{}
	for _, d := range doc.Cubes[0].Dimensions {
		if seen[d.Name] || d.SQL == "" || (d.Type != "string" && d.Type != "number" && d.Type != "time" && d.Type != "boolean") {
			t.Errorf("%s: bad or duplicate dimension %+v", f.Path, d)
		}
		seen[d.Name] = true
	}
	for _, m := range doc.Cubes[0].Measures {
		if seen[m.Name] || m.Type == "" {
			t.Errorf("%s: bad or duplicate measure %+v", f.Path, m)
		}
		seen[m.Name] = true
	}
	if len(doc.Cubes[0].Measures) == 0 || doc.Cubes[0].Measures[0].Name != "count" {
		t.Errorf("%s: no default count measure", f.Path)
	}
	for _, j := range doc.Cubes[0].Joins {
		if (j.Relationship != "many_to_one" && j.Relationship != "one_to_one") || !strings.Contains(j.SQL, "{"+j.Name) {
			t.Errorf("%s: bad join %+v", f.Path, j)
		}
	}
}

// assertView checks a view file's shape: one view named after its file, rooted at one
// cube, each cube's path starting there.
func assertView(t *testing.T, f convert.File) {
	t.Helper()
	var doc struct {
		Views []struct {
			Name  string `yaml:"name"`
			Cubes []struct {
				JoinPath string `yaml:"join_path"`
				Includes []any  `yaml:"includes"`
			} `yaml:"cubes"`
		} `yaml:"views"`
	}
	if err := yaml.Unmarshal([]byte(f.Content), &doc); err != nil {
		t.Fatalf("%s is not YAML: %v", f.Path, err)
	}
	if len(doc.Views) != 1 || "model/views/"+doc.Views[0].Name+".yml" != f.Path || len(doc.Views[0].Cubes) == 0 {
		t.Fatalf("%s: not one view named after its file: %+v", f.Path, doc.Views)
	}
	root := doc.Views[0].Cubes[0].JoinPath
	for _, c := range doc.Views[0].Cubes {
		if len(c.Includes) == 0 || (c.JoinPath != root && !strings.HasPrefix(c.JoinPath, root+".")) {
			t.Errorf("%s: cube %+v is not reached from the root %s", f.Path, c, root)
		}
	}
}

func TestConvertV12SemanticModelsBecomeMeasures(t *testing.T) {
	p := decodeFile(t, filepath.Join(fixturesDir(t), "manifest-v12-dbt-1.10.json"))
	files := map[string]string{}
	for _, f := range convert.Build(p).Files {
		files[f.Path] = f.Content
	}
	for path, wants := range map[string][]string{
		"model/cubes/customers.yml":   {"name: customers\n        sql: \"{CUBE}.customer_id\"\n        type: count_distinct", "name: average_order_value", "\"{lifetime_spend_pretax_sum} / {count_lifetime_orders_sum}\""},
		"model/cubes/orders.yml":      {"name: food_orders", "- sql: \"{CUBE}.is_food_order = true\"", "name: order_total_sum"},
		"model/cubes/order_items.yml": {"name: median_revenue", "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY {CUBE}.product_price)", "name: food_revenue_pct"},
		"model/cubes/locations.yml":   {"name: average_tax_rate\n        sql: \"{CUBE}.tax_rate\"\n        type: avg"},
	} {
		for _, want := range wants {
			if !strings.Contains(files[path], want) {
				t.Errorf("%s lacks %q:\n%s", path, want, files[path])
			}
		}
	}
}

func manifest(t *testing.T, nodes map[string]any, extra map[string]any) []byte {
	t.Helper()
	m := map[string]any{"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"}, "nodes": nodes}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func model(name string, cols map[string]any, extra map[string]any) map[string]any {
	n := map[string]any{"resource_type": "model", "name": name, "alias": name, "database": "db", "schema": "sch",
		"unique_id": "model.p." + name, "columns": cols, "config": map[string]any{"materialized": "table", "enabled": true},
		"raw_code": strings.Repeat("select 1 ", 100)}
	for k, v := range extra {
		n[k] = v
	}
	return n
}

func test(name, kind, modelName, column string, kwargs map[string]any) map[string]any {
	kw := map[string]any{"column_name": column, "model": "{{ get_where_subquery(ref('" + modelName + "')) }}"}
	for k, v := range kwargs {
		kw[k] = v
	}
	return map[string]any{"resource_type": "test", "name": name, "column_name": column, "test_metadata": map[string]any{"name": kind, "kwargs": kw}}
}

func TestConvertRules(t *testing.T) {
	nodes := map[string]any{
		"model.p.orders": model("orders", map[string]any{
			"id":          map[string]any{"name": "id", "data_type": "bigint"},
			"customer_id": map[string]any{"name": "customer_id", "data_type": "integer"},
			"placed_at":   map[string]any{"name": "placed_at", "data_type": "timestamp_ntz"},
			"is_paid":     map[string]any{"name": "is_paid", "data_type": "boolean"},
			"shape":       map[string]any{"name": "shape", "data_type": "hyperloglog"},
			"amount": map[string]any{"name": "amount", "data_type": "numeric(10,2)",
				"meta": map[string]any{"metrics": map[string]any{"total_amount": map[string]any{"type": "sum", "description": "from meta"}}}},
		}, map[string]any{"meta": map[string]any{"primary_key": "wrong"}, "config": map[string]any{"materialized": "table", "meta": map[string]any{"measures": map[string]any{"paid_orders": map[string]any{"type": "count_distinct", "sql": "CASE WHEN {CUBE}.is_paid THEN {CUBE}.id END"}}}}}),
		"model.p.customers": model("customers", map[string]any{"cid": map[string]any{"name": "cid", "meta": map[string]any{"primary_key": true}}}, nil),
		"model.p.eph":       model("eph", nil, map[string]any{"config": map[string]any{"materialized": "ephemeral"}}),
		"model.p.bad":       model("bad name", nil, nil),
		"test.p.u":          test("u", "unique", "orders", "id", nil),
		"test.p.nn":         test("nn", "not_null", "orders", "id", nil),
		"test.p.rel":        test("rel", "relationships", "orders", "customer_id", map[string]any{"to": "ref('customers')", "field": "cid"}),
		"test.p.u2":         test("u2", "unique", "orders", "placed_at", nil),
	}
	p, err := convert.DecodeManifest(bytes.NewReader(manifest(t, nodes, nil)))
	if err != nil {
		t.Fatal(err)
	}
	res := convert.Build(p)
	var paths []string
	files := map[string]string{}
	for _, f := range res.Files {
		paths = append(paths, f.Path)
		files[f.Path] = f.Content
	}
	if got, want := strings.Join(paths, ","), "model/cubes/bad_name.yml,model/cubes/customers.yml,model/cubes/orders.yml"; got != want {
		t.Fatalf("files = %s, want %s", got, want)
	}
	orders := files["model/cubes/orders.yml"]
	for _, want := range []string{
		"sql_table: \"db.sch.orders\"",
		"- name: id\n        sql: \"{CUBE}.id\"\n        type: number\n        primary_key: true",
		"- name: placed_at\n        sql: \"{CUBE}.placed_at\"\n        type: time\n",
		"- name: is_paid\n        sql: \"{CUBE}.is_paid\"\n        type: boolean",
		"- name: shape\n        sql: \"{CUBE}.shape\"\n        type: string",
		"- name: count\n        type: count",
		"- name: total_amount\n        sql: \"{CUBE}.amount\"\n        type: sum\n        description: \"from meta\"",
		"- name: paid_orders",
		"- name: customers\n        sql: \"{CUBE}.customer_id = {customers}.cid\"\n        relationship: many_to_one",
	} {
		if !strings.Contains(orders, want) {
			t.Errorf("orders.yml lacks %q:\n%s", want, orders)
		}
	}
	if strings.Contains(orders, "placed_at\"\n        type: time\n        primary_key") {
		t.Error("a column with only a unique test became a primary key")
	}
	if !strings.Contains(files["model/cubes/bad_name.yml"], "- name: bad_name\n    title: \"bad name\"\n") {
		t.Errorf("a model whose name is not an identifier becomes a cube named after it, titled with it:\n%s", files["model/cubes/bad_name.yml"])
	}
	if !strings.Contains(files["model/cubes/customers.yml"], "primary_key: true") {
		t.Error("column meta primary_key was ignored")
	}
	warnings := map[string]bool{}
	for _, w := range res.Warnings {
		warnings[w.Model+": "+w.Message] = true
	}
	for _, want := range []string{
		`model.p.orders: column "shape": unknown data type "hyperloglog", typed as string`,
		"model.p.eph: model skipped: ephemeral models have no table to query",
	} {
		if !warnings[want] {
			t.Errorf("missing warning %q in %v", want, res.Warnings)
		}
	}
}

func TestDecodeManifestFailures(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want error
		msg  string
	}{
		{"not-json", "this is not json", convert.ErrNotJSON, ""},
		{"truncated", `{"metadata": {}, "nodes": {"a": `, convert.ErrNotJSON, ""},
		{"no-nodes", `{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json"}}`, convert.ErrNoNodes, ""},
		{"array", `[1, 2]`, convert.ErrNotManifest, ""},
		{"unsupported-version", `{"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v6.json"}, "nodes": {}}`, nil, "v6"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := convert.DecodeManifest(strings.NewReader(tc.in))
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want it to name %s", err, tc.msg)
			}
		})
	}
}

func TestConvertChangedModelChangesOnlyItsFile(t *testing.T) {
	build := func(desc string) map[string]string {
		nodes := map[string]any{
			"model.p.a": model("a", map[string]any{"x": map[string]any{"name": "x"}}, map[string]any{"description": desc}),
			"model.p.b": model("b", map[string]any{"y": map[string]any{"name": "y"}}, nil),
		}
		p, err := convert.DecodeManifest(bytes.NewReader(manifest(t, nodes, nil)))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range convert.Build(p).Files {
			out[f.Path] = f.Content
		}
		return out
	}
	one, two := build("first"), build("second")
	if one["model/cubes/b.yml"] != two["model/cubes/b.yml"] {
		t.Error("an unchanged model's file changed")
	}
	if one["model/cubes/a.yml"] == two["model/cubes/a.yml"] {
		t.Error("the changed model's file did not change")
	}
}

// FuzzDecodeManifest: any input decodes or fails with an error; never a panic, and what
// decodes builds.
func FuzzDecodeManifest(f *testing.F) {
	for _, s := range []string{`{"nodes":{}}`, `{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v12.json"},"nodes":{"model.p.a":{"resource_type":"model","name":"a","columns":{"x":{"name":"x","data_type":"int"}}}}}`,
		`{"nodes":{"t":{"resource_type":"test","test_metadata":{"name":"relationships","kwargs":{"to":"ref('b')","field":"id","column_name":"x","model":"ref('a')"}}}}}`,
		`{"nodes":[]}`, `[]`, `{"nodes":{"a":{"name":{"x":1}}}}`, `{"semantic_models":{"s":{"model":"ref('a')","measures":[{"name":"m","agg":"median"}]}},"nodes":{}}`,
		`{"nodes":{"model.p.a.v1":{"resource_type":"model","name":"a","version":1,"latest_version":2},"model.p.a.v2":{"resource_type":"model","name":"a","version":2,"latest_version":2,"columns":{"id":{"name":"id"}}}},` +
			`"semantic_models":{"s":{"name":"s","model":"ref('a', v=1)","entities":[{"name":"e","type":"primary","expr":"id"}],"dimensions":[{"name":"d","type":"time","type_params":{"time_granularity":"day"}}],"measures":[{"name":"m","agg":"sum","expr":"id"}]}},` +
			`"metrics":{"a":{"name":"a","type":"simple","type_params":{"measure":{"name":"m","filter":{"where_filters":[{"where_sql_template":"{{ Dimension('e__d') }} > 1"}]}}}},` +
			`"c":{"name":"c","type":"cumulative","type_params":{"measure":{"name":"m"},"cumulative_type_params":{"window":{"count":7,"granularity":"day"}}}},` +
			`"d":{"name":"d","type":"derived","type_params":{"expr":"a - b","metrics":[{"name":"a"},{"name":"a","alias":"b","offset_window":{"count":1,"granularity":"month"}}]}},` +
			`"r":{"name":"r","type":"ratio","type_params":{"numerator":{"name":"a"},"denominator":{"name":"c","filter":{"where_filters":[{"where_sql_template":"1 = 1"}]}}}}},` +
			`"saved_queries":{"q":{"name":"q","query_params":{"metrics":["a","d"],"group_by":["Entity('e')"],"where":{"where_filters":[{"where_sql_template":"{{ Dimension('e__d') }} in ('x', 'y')"}]}}}}}`,
		`{"metadata":{"dbt_schema_version":"https://schemas.getdbt.com/dbt/manifest/v8.json"},"nodes":{"model.p.a":{"resource_type":"model","name":"a"}},` +
			`"metrics":{"m":{"name":"m","calculation_method":"sum","expression":"x","model":"ref('a')","timestamp":"t","window":{"count":2,"period":"week"},"filters":[{"field":"y","operator":"=","value":"1"}]},` +
			`"n":{"name":"n","calculation_method":"derived","expression":"{{ metric('m') }} * 2"}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := convert.DecodeManifest(bytes.NewReader(in))
		if err != nil {
			return
		}
		for _, file := range convert.Build(p).Files {
			checkCubeYAML(t, file)
		}
	})
}

// checkCubeYAML: a generated file is YAML with one named cube (or, under model/views/,
// one named view), and holds no Jinja delimiter, which would make Cube treat it as a
// template.
func checkCubeYAML(t *testing.T, file convert.File) {
	t.Helper()
	var doc struct {
		Cubes []struct {
			Name string `yaml:"name"`
		} `yaml:"cubes"`
		Views []struct {
			Name string `yaml:"name"`
		} `yaml:"views"`
	}
	if err := yaml.Unmarshal([]byte(file.Content), &doc); err != nil {
		t.Fatalf("%s is not YAML: %v\n%s", file.Path, err, file.Content)
	}
	named := doc.Cubes
	if strings.HasPrefix(file.Path, "model/views/") {
		named = doc.Views
	}
	if len(named)+len(doc.Cubes)+len(doc.Views) != 2 || named[0].Name == "" {
		t.Fatalf("%s does not hold one named cube or view:\n%s", file.Path, file.Content)
	}
	for _, delim := range []string{"{{", "}}", "{%", "%}"} {
		if strings.Contains(file.Content, delim) {
			t.Fatalf("%s holds the Jinja delimiter %q:\n%s", file.Path, delim, file.Content)
		}
	}
}

// FuzzCubeText: whatever text a model's description, a column's name and description
// and its meta hold, the file is valid YAML, free of Jinja, and carries the text.
func FuzzCubeText(f *testing.F) {
	for _, s := range []string{"plain", "{{ jinja }}", "{% if %}", "a \\ b \" c", "tab\tnl\n", "\x00\x1b[31m", "Order Date", "2fa", "sql", "é{}"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, desc, name string) {
		nodes := map[string]any{"model.p.m": model("m", map[string]any{
			"c": map[string]any{"name": name, "description": desc, "data_type": desc, "meta": map[string]any{"k": desc, "n": map[string]any{"x": map[string]any{"y": desc}}}},
		}, map[string]any{"description": desc})}
		raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"adapter_type": "postgres"}, "nodes": nodes})
		if err != nil {
			return
		}
		p, err := convert.DecodeManifest(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("a manifest of valid JSON failed to decode: %v", err)
		}
		res := convert.Build(p)
		if len(res.Files) != 1 {
			t.Fatalf("want one file, got %d (%v)", len(res.Files), res.Warnings)
		}
		checkCubeYAML(t, res.Files[0])
	})
}

// The files a caller prepares from DecodeManifestNotify's models that MayConvert are the
// files Build generates, for every real manifest: the model callback sees each model once,
// as decoded, and MayConvert follows Build's rules.
func TestDecodeManifestNotifyAnnouncesTheModelsThatConvert(t *testing.T) {
	fixtures, _ := filepath.Glob(filepath.Join(fixturesDir(t), "*.json"))
	own, _ := filepath.Glob(filepath.Join("testdata", "semantic", "*.json"))
	for _, path := range append(fixtures, own...) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var seen []*convert.Model
			announced := map[string]bool{}
			p, err := convert.DecodeManifestNotify(f, func(m *convert.Model) {
				seen = append(seen, m)
				if convert.MayConvert(m) {
					announced[convert.PathFor(m)] = true
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != len(p.Models) {
				t.Fatalf("callback saw %d models, the project has %d", len(seen), len(p.Models))
			}
			for i := range seen {
				if seen[i] != p.Models[i] {
					t.Fatalf("model %d: callback saw %s, the project holds %s", i, seen[i].UniqueID, p.Models[i].UniqueID)
				}
			}
			want := map[string]bool{}
			for _, file := range convert.Build(p).Files {
				if strings.HasPrefix(file.Path, "model/cubes/") { // a saved query's view names no model
					want[file.Path] = true
				}
			}
			if len(announced) != len(want) {
				t.Errorf("announced %d files, Build wrote %d", len(announced), len(want))
			}
			for path := range want {
				if !announced[path] {
					t.Errorf("%s was written but not announced", path)
				}
			}
		})
	}
}
