package convert_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// selectNames applies select and exclude to p and returns the kept models' names, sorted.
func selectNames(t *testing.T, p *convert.Project, sel, excl string) ([]string, convert.Selection) {
	t.Helper()
	s, err := convert.ParseSelector(sel, excl, convert.SelectorLimits{})
	if err != nil {
		t.Fatalf("ParseSelector(%q, %q): %v", sel, excl, err)
	}
	res, err := s.Apply(p)
	if err != nil {
		t.Fatalf("Apply(%q, %q): %v", sel, excl, err)
	}
	names := []string{}
	for _, m := range p.Models {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names, res
}

func decodeFixture(t *testing.T, name string) *convert.Project {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixturesDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	p, err := convert.DecodeManifest(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func words(s string) []string {
	w := strings.Fields(s)
	sort.Strings(w)
	if w == nil {
		w = []string{}
	}
	return w
}

// The selections dbt's node-selection rules give on the real fixtures (dbt ls
// --resource-type model --select … --exclude …), worked out from dbt's documented
// semantics and its selector code: the fqn method matches a model's name or a dotted
// prefix of its fqn with or without the package (so a directory name selects the
// models in it), wildcards match from their part to the end of the fqn (so stg_*
// matches no nested model), path globs name a file or a directory above it, graph
// operators walk through seeds and other packages' models, and @ adds the ancestors of
// every descendant.
func TestSelectorOnRealManifests(t *testing.T) {
	cases := []struct {
		fixture, sel, excl, want string
	}{
		// jaffle_shop, dbt 1.6: customers and orders over the three staging models over seeds.
		{"manifest-v10-dbt-1.6.json", "customers", "", "customers"},
		{"manifest-v10-dbt-1.6.json", "staging", "", "stg_customers stg_orders stg_payments"},
		{"manifest-v10-dbt-1.6.json", "jaffle_shop.staging.*", "", "stg_customers stg_orders stg_payments"},
		{"manifest-v10-dbt-1.6.json", "stg_*", "", ""},
		{"manifest-v10-dbt-1.6.json", "*orders", "", "orders stg_orders"},
		{"manifest-v10-dbt-1.6.json", "cust*", "", "customers"},
		{"manifest-v10-dbt-1.6.json", "staging.stg_[co]*", "", "stg_customers stg_orders"},
		{"manifest-v10-dbt-1.6.json", "staging.stg_[!co]*", "", "stg_payments"},
		{"manifest-v10-dbt-1.6.json", "tag:lightdash", "", "customers orders test_lightdash"},
		{"manifest-v10-dbt-1.6.json", "tag:light*", "", "customers orders test_lightdash"},
		{"manifest-v10-dbt-1.6.json", "path:models/staging", "", "stg_customers stg_orders stg_payments"},
		{"manifest-v10-dbt-1.6.json", "models/staging/stg_orders.sql", "", "stg_orders"},
		{"manifest-v10-dbt-1.6.json", "path:models/*.sql", "", "customers orders test_lightdash"},
		{"manifest-v10-dbt-1.6.json", "path:models/**/stg_p*.sql", "", "stg_payments"},
		{"manifest-v10-dbt-1.6.json", "path:models", "", "customers orders stg_customers stg_orders stg_payments test_lightdash"},
		{"manifest-v10-dbt-1.6.json", "path:./models/staging/", "", "stg_customers stg_orders stg_payments"},
		{"manifest-v10-dbt-1.6.json", "stg_orders.sql", "", "stg_orders"},
		{"manifest-v10-dbt-1.6.json", "file:stg_orders", "", "stg_orders"},
		{"manifest-v10-dbt-1.6.json", "package:jaffle_shop", "", "customers orders stg_customers stg_orders stg_payments test_lightdash"},
		{"manifest-v10-dbt-1.6.json", "package:this", "", "customers orders stg_customers stg_orders stg_payments test_lightdash"},
		{"manifest-v10-dbt-1.6.json", "+customers", "", "customers stg_customers stg_orders stg_payments"},
		{"manifest-v10-dbt-1.6.json", "1+customers", "", "customers stg_customers stg_orders stg_payments"},
		{"manifest-v10-dbt-1.6.json", "0+customers", "", "customers"},
		{"manifest-v10-dbt-1.6.json", "customers+", "", "customers"},
		{"manifest-v10-dbt-1.6.json", "stg_orders+", "", "customers orders stg_orders"},
		{"manifest-v10-dbt-1.6.json", "raw_orders+1", "", "stg_orders"},
		{"manifest-v10-dbt-1.6.json", "raw_orders+", "", "customers orders stg_orders"},
		{"manifest-v10-dbt-1.6.json", "@stg_payments", "", "customers orders stg_customers stg_orders stg_payments"},
		{"manifest-v10-dbt-1.6.json", "tag:lightdash,+customers", "", "customers"},
		{"manifest-v10-dbt-1.6.json", "staging,stg_orders+", "", "stg_orders"},
		{"manifest-v10-dbt-1.6.json", "customers orders", "", "customers orders"},
		{"manifest-v10-dbt-1.6.json", "customers   orders ", "", "customers orders"},
		{"manifest-v10-dbt-1.6.json", "+customers", "stg_customers", "customers stg_orders stg_payments"},
		{"manifest-v10-dbt-1.6.json", "", "staging", "customers orders test_lightdash"},
		{"manifest-v10-dbt-1.6.json", "", "stg_payments+", "stg_customers stg_orders test_lightdash"},
		{"manifest-v10-dbt-1.6.json", "tag:lightdash", "tag:lightdash", ""},
		// dbt 1.7 with the elementary package's models beside jaffle_shop's.
		{"manifest-v11-dbt-1.7.json", "package:this", "", "customers orders stg_customers stg_orders stg_payments"},
		{"manifest-v11-dbt-1.7.json", "edr.alerts", "", "alerts_anomaly_detection alerts_dbt_models alerts_dbt_source_freshness alerts_dbt_tests alerts_schema_changes"},
		{"manifest-v11-dbt-1.7.json", "elementary.edr.run_results.*", "", "dbt_source_freshness_results elementary_test_results job_run_results model_run_results snapshot_run_results test_result_rows"},
		{"manifest-v11-dbt-1.7.json", "data_monitoring", "", ""},
		{"manifest-v11-dbt-1.7.json", "edr.data_monitoring", "", "anomaly_threshold_sensitivity data_monitoring_metrics metrics_anomaly_score schema_columns_snapshot"},
		{"manifest-v11-dbt-1.7.json", "+alerts_dbt_models", "", "alerts_dbt_models dbt_models dbt_run_results dbt_snapshots model_run_results snapshot_run_results"},
		{"manifest-v11-dbt-1.7.json", "2+alerts_dbt_models", "", "alerts_dbt_models dbt_models dbt_run_results dbt_snapshots model_run_results snapshot_run_results"},
		{"manifest-v11-dbt-1.7.json", "1+alerts_dbt_models", "", "alerts_dbt_models model_run_results snapshot_run_results"},
		{"manifest-v11-dbt-1.7.json", "dbt_run_results+1", "", "dbt_run_results model_run_results snapshot_run_results"},
		{"manifest-v11-dbt-1.7.json", "dbt_run_results+", "", "alerts_dbt_models dbt_run_results model_run_results snapshot_run_results"},
		{"manifest-v11-dbt-1.7.json", "tag:on-run-end", "", ""},
		{"manifest-v11-dbt-1.7.json", "path:models/edr/system", "", "metadata monitors_runs"},
		{"manifest-v11-dbt-1.7.json", "tag:piperider,tag:lightdash", "", "customers orders"},
		{"manifest-v11-dbt-1.7.json", "@data_monitoring_metrics", "", "anomaly_threshold_sensitivity data_monitoring_metrics metrics_anomaly_score monitors_runs"},
		{"manifest-v11-dbt-1.7.json", "package:elementary,edr.system", "", "metadata monitors_runs"},
		{"manifest-v11-dbt-1.7.json", "package:jaffle*", "staging", "customers orders"},
		// dbt 1.10's jaffle_shop: staging models over sources (not nodes), marts over them.
		{"manifest-v12-dbt-1.10.json", "+customers", "", "customers order_items orders stg_customers stg_order_items stg_orders stg_products stg_supplies"},
		{"manifest-v12-dbt-1.10.json", "stg_supplies+", "", "customers order_items orders stg_supplies supplies"},
		{"manifest-v12-dbt-1.10.json", "marts,stg_orders+", "", "customers order_items orders"},
		{"manifest-v12-dbt-1.10.json", "marts", "metricflow_time_spine", "customers locations order_items orders products supplies"},
		{"manifest-v12-dbt-1.10.json", "@stg_locations", "", "locations stg_locations"},
		// dbt 1.3: no metadata.project_name, so "this" names no package.
		{"manifest-v7-dbt-1.3.json", "package:this", "", ""},
		{"manifest-v7-dbt-1.3.json", "orders+ customers", "", "customers orders"},
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(c.fixture, ".json")+"/"+c.sel+"/-"+c.excl, func(t *testing.T) {
			p := decodeFixture(t, c.fixture)
			total := len(p.Models)
			got, res := selectNames(t, p, c.sel, c.excl)
			if want := words(c.want); !reflect.DeepEqual(got, want) {
				t.Fatalf("select %q exclude %q kept %v, want %v", c.sel, c.excl, got, want)
			}
			if res.ModelsTotal != total || res.ModelsKept != len(got) || res.ModelsDropped != total-len(got) ||
				len(res.Kept) != len(got) || len(res.Dropped) != total-len(got) || res.Truncated {
				t.Fatalf("selection report %+v for %d of %d models", res, len(got), total)
			}
		})
	}
}

// manifestOf builds a manifest from nodes (as dbt writes them) and decodes it.
func manifestOf(t testing.TB, nodes map[string]any) *convert.Project {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v12.json",
		"project_name": "p"}, "nodes": nodes})
	if err != nil {
		t.Fatal(err)
	}
	p, err := convert.DecodeManifest(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func graphNode(kind, name string, fqn []string, deps ...string) map[string]any {
	return map[string]any{"resource_type": kind, "name": name, "package_name": "p", "fqn": fqn,
		"original_file_path": "models/" + name + ".sql", "depends_on": map[string]any{"nodes": deps},
		"config": map[string]any{"materialized": "table", "enabled": true}}
}

// Model versions match by their model's name or by name.vN and name_vN; a graph operator
// walks through a snapshot between two models.
func TestSelectorVersionsAndNonModelNodes(t *testing.T) {
	nodes := map[string]any{
		"model.p.dim.v1":  graphNode("model", "dim", []string{"p", "dim", "v1"}),
		"model.p.dim.v2":  graphNode("model", "dim", []string{"p", "dim", "v2"}),
		"model.p.a":       graphNode("model", "a", []string{"p", "a"}),
		"snapshot.p.snap": graphNode("snapshot", "snap", []string{"p", "snap"}, "model.p.a"),
		"model.p.b":       graphNode("model", "b", []string{"p", "b"}, "snapshot.p.snap"),
		"test.p.t":        graphNode("test", "t", []string{"p", "t"}, "model.p.b"),
	}
	nodes["model.p.dim.v1"].(map[string]any)["version"] = 1
	nodes["model.p.dim.v2"].(map[string]any)["version"] = 2
	ids := func(p *convert.Project) string {
		var out []string
		for _, m := range p.Models {
			out = append(out, m.UniqueID)
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	for _, c := range []struct{ sel, want string }{
		{"dim", "model.p.dim.v1 model.p.dim.v2"},
		{"dim.v2", "model.p.dim.v2"},
		{"dim_v1", "model.p.dim.v1"},
		{"a+", "model.p.a model.p.b"},
		{"+b", "model.p.a model.p.b"},
		{"1+b", "model.p.b"},
		{"snap+", "model.p.b"},
	} {
		p := manifestOf(t, nodes)
		s, err := convert.ParseSelector(c.sel, "", convert.SelectorLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(p); err != nil {
			t.Fatal(err)
		}
		if got := ids(p); got != c.want {
			t.Errorf("select %q kept %q, want %q", c.sel, got, c.want)
		}
	}
}

// What cannot be read is a *SelectorError naming the field and why; limits name their
// value.
func TestSelectorRefusals(t *testing.T) {
	for _, c := range []struct{ sel, excl, field, says string }{
		{"config.materialized:table", "", "select", `method "config" is not supported`},
		{"bogus:x", "", "select", `"bogus" is not a valid method name`},
		{"tag.x:y", "", "select", `method "tag" takes no arguments`},
		{"@a+", "", "select", `"@" prefix and the "+" suffix`},
		{"+", "", "select", "names nothing"},
		{"a,,b", "", "select", "names nothing"},
		{"", "source:raw", "exclude", `method "source" is not supported`},
		{strings.Repeat("a", 4097), "", "select", "over the limit of 4096 bytes"},
		{strings.Repeat("a ", 40), strings.Repeat("b ", 30), "exclude", "more than 64 criteria"},
		{"\xff", "", "select", "not valid UTF-8"},
	} {
		_, err := convert.ParseSelector(c.sel, c.excl, convert.SelectorLimits{})
		var se *convert.SelectorError
		if !errors.As(err, &se) || se.Field != c.field || !strings.Contains(se.Error(), c.says) {
			t.Errorf("ParseSelector(%.40q, %.40q) = %v, want a %s error saying %q", c.sel, c.excl, err, c.field, c.says)
		}
	}
}

// A hostile manifest's graph (a long chain, every node depending on all before it) is
// walked on a step budget: past it the selection fails naming the limit, and within it a
// chain of 5,000 models is walked without recursion.
func TestSelectorGraphWalkIsBounded(t *testing.T) {
	const n = 5000
	nodes := map[string]any{}
	for i := range n {
		id := "model.p.m" + strconv.Itoa(i)
		var deps []string
		if i > 0 {
			deps = []string{"model.p.m" + strconv.Itoa(i-1)}
		}
		nodes[id] = graphNode("model", "m"+strconv.Itoa(i), []string{"p", "m" + strconv.Itoa(i)}, deps...)
	}
	p := manifestOf(t, nodes)
	s, _ := convert.ParseSelector("+m4999", "", convert.SelectorLimits{})
	res, err := s.Apply(p)
	if err != nil || res.ModelsKept != n || len(res.Kept) != convert.SelectionListMax || !res.Truncated {
		t.Fatalf("+m4999 over a chain: %+v %v", res, err)
	}
	p = manifestOf(t, nodes)
	s, _ = convert.ParseSelector("+m4999", "", convert.SelectorLimits{MaxSteps: 1000})
	var le *convert.SelectorLimitError
	if _, err := s.Apply(p); !errors.As(err, &le) || !strings.Contains(err.Error(), "limit of 1000 edges") {
		t.Fatalf("over the step budget: %v", err)
	}
}

// A project read from its files has names, tags (dbt_project.yml's per directory, the
// schema file's, the model's config()) and paths, but no graph: graph operators are
// ErrSelectorNeedsManifest.
func TestSelectorOnProjectFiles(t *testing.T) {
	fsys := fstest.MapFS{
		"dbt_project.yml":          {Data: []byte("name: shop\nmodels:\n  shop:\n    staging:\n      +tags: [raw]\n")},
		"models/staging/stg_a.sql": {Data: []byte("select 1")},
		"models/staging/stg_b.sql": {Data: []byte("{{ config(tags=['hourly']) }} select 1")},
		"models/marts/fct.sql":     {Data: []byte("select 1")},
		"models/marts/schema.yml":  {Data: []byte("models:\n  - name: fct\n    config:\n      tags: finance\n")},
	}
	for _, c := range []struct{ sel, excl, want string }{
		{"staging", "", "stg_a stg_b"},
		{"tag:raw", "", "stg_a stg_b"},
		{"tag:hourly", "", "stg_b"},
		{"tag:finance", "", "fct"},
		{"path:models/marts", "", "fct"},
		{"path:models/marts/schema.yml", "", "fct"},
		{"shop.staging.*", "stg_a", "stg_b"},
		{"package:this", "tag:raw", "fct"},
	} {
		p, err := convert.ReadProject(fsys, ".")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := selectNames(t, p, c.sel, c.excl)
		if want := words(c.want); !reflect.DeepEqual(got, want) {
			t.Errorf("select %q exclude %q kept %v, want %v", c.sel, c.excl, got, want)
		}
	}
	p, _ := convert.ReadProject(fsys, ".")
	s, _ := convert.ParseSelector("+fct", "", convert.SelectorLimits{})
	if _, err := s.Apply(p); !errors.Is(err, convert.ErrSelectorNeedsManifest) {
		t.Fatalf("+fct on project files: %v, want ErrSelectorNeedsManifest", err)
	}
}
