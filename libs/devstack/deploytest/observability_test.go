package deploytest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/analyticsco/platform/libs/devstack/internal/promexpr"
)

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
