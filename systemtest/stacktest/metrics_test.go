package stacktest_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/analyticsco/platform/devstack"
	"github.com/analyticsco/platform/devstack/apitest"
	"github.com/analyticsco/platform/devstack/promexpr"
	"github.com/analyticsco/platform/systemtest/stacktest"
)

// TestRulesAndDashboardsNameExportedMetrics: every metric that a recording rule, an
// alert or a dashboard of deploy/ reads is one that the platform's processes really
// export, as scraped from their internal listeners after a little traffic has reached
// every service (a labelled series appears with its first sample). Series Prometheus
// makes itself (up, ALERTS) and the recording rules' own outputs are the exceptions.
func TestRulesAndDashboardsNameExportedMetrics(t *testing.T) {
	s := stacktest.Start(t, stacktest.Options{})
	acme := s.Seed.Accounts["acme"]
	dep := acme.Deployments[0].ID
	bearer := "Bearer " + acme.Users["admin"].Bearer
	call := func(method, path string, body any, want ...int) map[string]any {
		t.Helper()
		r := apitest.New(s.Gateway).Call(t, method, path, bearer, body)
		var out map[string]any
		_ = json.Unmarshal(r.Body, &out)
		if len(want) > 0 && r.Status != want[0] {
			t.Fatalf("%s %s: %d %v, want %d", method, path, r.Status, out, want[0])
		}
		return out
	}
	// One request per service, and a move so the workspace's move counter has a series.
	folder := call("POST", fmt.Sprintf("/api/v1/deployments/%d/folders", dep), map[string]any{"name": "metrics folder"}, 200)
	wb := call("POST", fmt.Sprintf("/api/v1/deployments/%d/workbooks", dep), map[string]any{"name": "metrics workbook", "folderId": folder["id"]}, 200)
	call("POST", fmt.Sprintf("/api/v1/deployments/%d/workspace/move", dep), map[string]any{"type": "WORKBOOK", "id": wb["id"], "folderId": nil}, 200)
	call("GET", "/api/v1/groups", nil)
	call("GET", fmt.Sprintf("/api/v1/deployments/%d/dbt-sync/no-such-job", dep), nil)

	exported := map[string]bool{}
	for _, p := range s.Processes() {
		for _, n := range scrapeNames(t, "http://"+p.InternalAddr+"/metrics") {
			exported[n] = true
		}
	}
	root := devstack.RepoRoot(t)
	rules, err := promexpr.LoadRules(filepath.Join(root, "deploy", "prometheus", "rules", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{"up": true, "ALERTS": true}
	readBy := map[string][]string{}
	for _, r := range rules {
		if r.Record != "" {
			recorded[r.Record] = true
		}
		for _, n := range promexpr.MetricNames(r.Expr) {
			readBy[n] = append(readBy[n], "rule "+r.Record+r.Alert)
		}
	}
	dashboards, err := promexpr.LoadDashboards(filepath.Join(root, "deploy", "grafana", "dashboards"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dashboards {
		for _, q := range d.Queries() {
			for _, n := range promexpr.MetricNames(promexpr.FromGrafana(q.Expr)) {
				readBy[n] = append(readBy[n], "dashboard "+d.UID+" / "+q.Panel)
			}
		}
	}
	var missing []string
	for n, by := range readBy {
		if !recorded[n] && !exported[n] {
			missing = append(missing, fmt.Sprintf("%s (read by %s)", n, strings.Join(by[:min(len(by), 3)], ", ")))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no process exports these metrics:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(readBy) < 20 || len(exported) < 50 {
		t.Fatalf("read %d names from the rules and dashboards and scraped %d: the check saw too little", len(readBy), len(exported))
	}
}

// scrapeNames are the names of the samples of one /metrics page (a histogram's
// _bucket, _sum and _count included).
func scrapeNames(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out = append(out, line[:i])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
