package convert_test

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
	"github.com/analyticsco/platform/devstack/cubecompiler"
)

// A selected subset of a real manifest still compiles in Cube's schema compiler: only
// the selected models become cubes, and what refers to a model left out (a
// relationships test's join, a semantic model, the metrics and saved queries over it)
// is handled as a reference to a model the data model lacks: a warning, never a
// dangling reference.
func TestCubeCompilesSelectedSubsets(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	semantic := filepath.Join("testdata", "semantic", "manifest-v12-semantic.json")
	cases := []struct {
		manifest, sel, excl string
		cubes               string // the cubes compiled, sorted
		warns               string // a warning that says what was left out ("" for none expected)
	}{
		{"manifest-v10-dbt-1.6.json", "customers", "", "customers", ""},
		{"manifest-v10-dbt-1.6.json", "+orders", "stg_payments", "orders stg_orders", ""},
		{"manifest-v11-dbt-1.7.json", "package:this,tag:lightdash", "", "customers orders", ""},
		{"manifest-v12-dbt-1.8.json", "edr.alerts", "", "alerts_anomaly_detection alerts_dbt_models alerts_dbt_source_freshness alerts_dbt_tests alerts_schema_changes", ""},
		{"manifest-v12-dbt-1.10.json", "marts,stg_orders+", "", "customers order_items orders", "not part of the data model"},
		{semantic, "orders", "", "orders", "not part of the data model"},
		{semantic, "customers order_items", "", "customers customers_v1 customers_v3 order_items", "not part of the data model"},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.manifest)+"/"+c.sel+"/-"+c.excl, func(t *testing.T) {
			var p *convert.Project
			if strings.Contains(c.manifest, "/") {
				p = decodeFile(t, c.manifest)
			} else {
				p = decodeFixture(t, c.manifest)
			}
			selectNames(t, p, c.sel, c.excl)
			res, out := compileBuild(t, cc, p)
			var cubes []string
			for name, cube := range out.Cubes {
				if !cube.IsView {
					cubes = append(cubes, name)
				}
			}
			sort.Strings(cubes)
			if got := strings.Join(cubes, " "); got != c.cubes {
				t.Fatalf("cubes %q, want %q", got, c.cubes)
			}
			if c.warns != "" {
				found := false
				for _, w := range res.Warnings {
					found = found || strings.Contains(w.Message, c.warns)
				}
				if !found {
					t.Errorf("no warning says %q: %v", c.warns, res.Warnings)
				}
			}
		})
	}
}
