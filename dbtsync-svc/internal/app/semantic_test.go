package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/worker"
	"github.com/analyticsco/platform/devstack/cubecompiler"
)

// A sync job of a manifest with dbt's semantic layer (v12) or legacy metrics (v8)
// accounts for every metric in what a client reads: each is a public measure of the files
// the job wrote (under its name, or under the name a warning says it was renamed to), or
// a job warning naming the metric and why it was not converted; never both, never
// neither. The files compile with Cube's schema compiler.
func TestSyncJobWarningsNameEveryMetricNotConverted(t *testing.T) {
	cc := cubecompiler.Ensure(t)
	h := newHarness(t)
	h.worker(worker.Options{})
	for manifest, skipped := range map[string][]string{
		"manifest-v12-semantic.json":      {"open_balance", "order_conversion", "revenue_avg_7d", "revenue_vs_month_start", "status_filtered_by_revenue", "uses_unknown_word"},
		"manifest-v8-legacy-metrics.json": {"p95_order_amount", "regex_orders"},
	} {
		t.Run(manifest, func(t *testing.T) { checkMetricsAccountedFor(t, h, cc, manifest, skipped) })
	}
}

// checkMetricsAccountedFor syncs the testdata manifest name with output files and checks
// that its metrics are accounted for, want (sorted) being those skipped.
func checkMetricsAccountedFor(t *testing.T, h *harness, cc *cubecompiler.Compiler, name string, want []string) {
	raw, err := os.ReadFile(filepath.Join("..", "convert", "testdata", "semantic", name))
	if err != nil {
		t.Fatal(err)
	}
	var manifest struct {
		Metrics map[string]struct {
			Name string `json:"name"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal(raw, &manifest); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	code, acc := h.do("POST", h.syncPath(), h.dev, map[string]any{"source": "manifest", "manifest": body, "output": "files"})
	if code != 202 {
		t.Fatalf("start: %d %v", code, acc)
	}
	job := h.waitJob(acc["syncJobId"].(string))
	if job["status"] != "succeeded" {
		t.Fatalf("job: %v", job)
	}
	files := map[string]string{}
	for _, f := range job["files"].([]any) {
		m := f.(map[string]any)
		files[m["path"].(string)] = m["content"].(string)
	}
	out := cc.CompileFiles(t, files)
	if len(out.Errors) > 0 {
		t.Fatalf("Cube's schema compiler refused the job's files: %s", out)
	}
	public := map[string]bool{}
	for _, c := range out.Cubes {
		if c.IsView {
			continue
		}
		for name, m := range c.Measures {
			if m.Public {
				public[name] = true
			}
		}
	}
	renames, skipped := metricWarnings(job)
	var metrics []string
	for _, m := range manifest.Metrics {
		metrics = append(metrics, m.Name)
	}
	sort.Strings(metrics)
	if len(metrics) <= len(want) {
		t.Fatalf("the manifest has %d metrics, fewer than it skips", len(metrics))
	}
	for _, name := range metrics {
		member := name
		if r, ok := renames[name]; ok {
			member = r
		}
		why, warned := skipped[name]
		switch {
		case public[member] && warned:
			t.Errorf("metric %s is the measure %s and a warning says it was skipped: %s", name, member, why)
		case !public[member] && !warned:
			t.Errorf("metric %s is neither a public measure nor a job warning", name)
		case warned && why == "":
			t.Errorf("the warning for metric %s says not why", name)
		}
	}
	var got []string
	for name := range skipped {
		got = append(got, name)
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the job's warnings skip metrics %v, want %v", got, want)
	}
}

// metricWarnings reads a job's warnings: the measures renamed (name -> new name) and the
// metrics skipped (name -> why).
func metricWarnings(job map[string]any) (renames, skipped map[string]string) {
	renamed := regexp.MustCompile(`^measure "([^"]+)" renamed "([^"]+)"`)
	renames, skipped = map[string]string{}, map[string]string{}
	for _, w := range job["warnings"].([]any) {
		m := w.(map[string]any)
		model, msg := m["model"].(string), m["message"].(string)
		if r := renamed.FindStringSubmatch(msg); r != nil {
			renames[r[1]] = r[2]
		}
		if name, ok := strings.CutPrefix(model, "metric."); ok {
			if why, ok := strings.CutPrefix(msg, "metric skipped: "); ok {
				skipped[name] = why
			}
		}
	}
	return renames, skipped
}
