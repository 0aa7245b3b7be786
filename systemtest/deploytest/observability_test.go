package deploytest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/analyticsco/platform/devstack/promexpr"
)

// promSyntheticSeries are the series Prometheus makes itself, never exported by a
// process: up (one per scrape target) and ALERTS (one per pending or firing alert).
var promSyntheticSeries = []string{"up", "ALERTS"}

func promDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "prometheus") }

// TestPrometheusRulesPassPromtool: the config, the rules and their unit tests, judged by
// their real consumer. promtool comes with Debian's prometheus package.
func TestPrometheusRulesPassPromtool(t *testing.T) {
	promtool := promexpr.Promtool(t)
	dir := promDir(t)
	rules, _ := filepath.Glob(filepath.Join(dir, "rules", "*.yml"))
	tests, _ := filepath.Glob(filepath.Join(dir, "tests", "*.yml"))
	if len(rules) == 0 || len(tests) == 0 {
		t.Fatalf("no rules (%v) or no rule tests (%v) under %s", rules, tests, dir)
	}
	for _, args := range [][]string{
		{"check", "config", filepath.Join(dir, "prometheus.yml")},
		append([]string{"check", "rules", "--lint=all", "--lint-fatal"}, rules...),
		append([]string{"test", "rules"}, tests...),
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args[:2], " "), err, out)
		}
	}
}

// TestEveryAlertHasARunbookAndAUnitTest: each alert says how bad it is (page or ticket),
// what it means, where its runbook section is (and RUNBOOK.md has it), and at least one
// promtool unit test makes it fire.
func TestEveryAlertHasARunbookAndAUnitTest(t *testing.T) {
	dir := promDir(t)
	rules, err := promexpr.LoadRules(filepath.Join(dir, "rules", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile(filepath.Join(dir, "RUNBOOK.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(runbook), -1) {
		headings[strings.ToLower(m[1])] = true
	}
	fired := firedInUnitTests(t, filepath.Join(dir, "tests", "*.yml"))
	alerts := 0
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		alerts++
		if s := r.Labels["severity"]; s != "page" && s != "ticket" {
			t.Errorf("%s: severity %q, want page or ticket", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook"} {
			if r.Annotations[a] == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		if want := "deploy/prometheus/RUNBOOK.md#" + strings.ToLower(r.Alert); r.Annotations["runbook"] != want {
			t.Errorf("%s: runbook %q, want %q", r.Alert, r.Annotations["runbook"], want)
		}
		if !headings[strings.ToLower(r.Alert)] {
			t.Errorf("%s: RUNBOOK.md has no section \"## %s\"", r.Alert, r.Alert)
		}
		if !fired[r.Alert] {
			t.Errorf("%s: no promtool unit test under deploy/prometheus/tests expects it to fire", r.Alert)
		}
	}
	if alerts == 0 {
		t.Fatal("no alerting rules")
	}
}

// firedInUnitTests are the alerts that some unit test expects to fire.
func firedInUnitTests(t *testing.T, glob string) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(glob)
	fired := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Tests []struct {
				AlertRuleTest []struct {
					Alertname string `yaml:"alertname"`
					ExpAlerts []any  `yaml:"exp_alerts"`
				} `yaml:"alert_rule_test"`
			} `yaml:"tests"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range doc.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fired[a.Alertname] = true
				}
			}
		}
	}
	return fired
}

// TestDashboardsAreValidAndReadRecordedSeries: every dashboard parses, has a unique uid,
// queries the provisioned Prometheus datasource, and every query is PromQL that
// promtool accepts and that names only recording rules, metrics the rules read (which
// stacktest compares with what the running processes export) or Prometheus's own
// series. The dashboards are built on the recording rules, so a renamed rule breaks
// this test rather than a graph.
func TestDashboardsAreValidAndReadRecordedSeries(t *testing.T) {
	root := repoRoot(t)
	rules, err := promexpr.LoadRules(filepath.Join(promDir(t), "rules", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{}
	for _, r := range rules {
		if r.Record != "" {
			known[r.Record] = "recording rule"
		}
	}
	for _, r := range rules {
		for _, n := range promexpr.MetricNames(r.Expr) {
			if _, ok := known[n]; !ok {
				known[n] = "read by a rule"
			}
		}
	}
	for _, n := range promSyntheticSeries {
		known[n] = "made by Prometheus"
	}
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
		} `yaml:"datasources"`
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "provisioning", "datasources", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &ds); err != nil || len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" {
		t.Fatalf("datasource provisioning: %v %+v", err, ds)
	}
	dashboards, err := promexpr.LoadDashboards(filepath.Join(root, "deploy", "grafana", "dashboards"))
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	exprs := map[string]string{}
	for _, d := range dashboards {
		if d.UID == "" || d.Title == "" {
			t.Errorf("%s: no uid or title", d.File)
		}
		if other, ok := uids[d.UID]; ok {
			t.Errorf("%s and %s share the uid %q", d.File, other, d.UID)
		}
		uids[d.UID] = d.File
		qs := d.Queries()
		if len(qs) == 0 {
			t.Errorf("%s: no queries", d.File)
		}
		for _, q := range qs {
			where := d.UID + " / " + q.Panel + " / " + q.RefID
			if q.Datasource == nil || q.Datasource.UID != ds.Datasources[0].UID {
				t.Errorf("%s: datasource %+v, want the provisioned uid %q", where, q.Datasource, ds.Datasources[0].UID)
			}
			expr := promexpr.FromGrafana(q.Expr)
			exprs[where] = expr
			for _, n := range promexpr.MetricNames(expr) {
				if _, ok := known[n]; !ok {
					t.Errorf("%s: %s is neither a recording rule, a metric the rules read, nor a series of Prometheus (%s)", where, n, q.Expr)
				}
			}
		}
	}
	promexpr.CheckExpressions(t, exprs)
}

// TestComposeRunsPrometheusWithRulesAndGrafana: compose's Prometheus loads the rules,
// Grafana (a pinned image) is provisioned with the datasource and the dashboards, and
// its home dashboard exists.
func TestComposeRunsPrometheusWithRulesAndGrafana(t *testing.T) {
	c := loadCompose(t)
	root := repoRoot(t)
	if !slices.Contains(c.Services["prometheus"].Volumes, "./deploy/prometheus/rules:/etc/prometheus/rules:ro") {
		t.Errorf("prometheus does not mount deploy/prometheus/rules beside its config: %v", c.Services["prometheus"].Volumes)
	}
	g, ok := c.Services["grafana"]
	if !ok {
		t.Fatal("docker-compose.yml has no grafana service")
	}
	if !regexp.MustCompile(`^grafana/grafana:\d+\.\d+\.\d+$`).MatchString(g.Image) {
		t.Errorf("grafana image %q: pin a version", g.Image)
	}
	mounts := map[string]string{}
	for _, v := range g.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Errorf("grafana volume %q", v)
			continue
		}
		mounts[parts[1]] = parts[0]
		if _, err := os.Stat(filepath.Join(root, parts[0])); err != nil {
			t.Errorf("grafana mounts %s, which does not exist: %v", parts[0], err)
		}
	}
	for target, source := range map[string]string{
		"/etc/grafana/provisioning/datasources": "./deploy/grafana/provisioning/datasources",
		"/etc/grafana/provisioning/dashboards":  "./deploy/grafana/provisioning/dashboards",
		"/var/lib/grafana/dashboards":           "./deploy/grafana/dashboards",
	} {
		if mounts[target] != source {
			t.Errorf("grafana mounts %q at %s, want %s", mounts[target], target, source)
		}
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "provisioning", "dashboards", "platform.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &prov); err != nil || len(prov.Providers) != 1 || prov.Providers[0].Options.Path != "/var/lib/grafana/dashboards" {
		t.Errorf("dashboard provider must read /var/lib/grafana/dashboards (where compose mounts them): %v %+v", err, prov)
	}
	home := g.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	if rel, ok := strings.CutPrefix(home, "/var/lib/grafana/dashboards/"); !ok {
		t.Errorf("home dashboard %q is not one of the mounted dashboards", home)
	} else if _, err := os.Stat(filepath.Join(root, "deploy", "grafana", "dashboards", rel)); err != nil {
		t.Errorf("home dashboard: %v", err)
	}
	if _, ok := g.DependsOn["prometheus"]; !ok {
		t.Error("grafana does not depend on prometheus")
	}
}
