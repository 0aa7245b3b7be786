// Package promexpr reads the platform's Prometheus rules (deploy/prometheus/rules) and
// Grafana dashboards (deploy/grafana/dashboards) for the tests that check them: their
// PromQL expressions, the metric names those select, and promtool, which judges them.
//
// The metric names are found by a small lexer instead of the Prometheus module's PromQL
// parser: that module's requirements would raise shared dependencies (otel, grpc,
// client_golang's siblings) for every module of the workspace, production ones included,
// for a test helper. Syntax is promtool's to judge (CheckExpressions); the lexer only
// has to find the selectors in expressions that promtool accepted.
package promexpr

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// Rule is one recording or alerting rule.
type Rule struct {
	File, Group         string
	Record, Alert, Expr string
	For                 string
	Labels, Annotations map[string]string
}

// LoadRules reads every rule of the rule files matched by glob.
func LoadRules(glob string) ([]Rule, error) {
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no rule files match %s (%v)", glob, err)
	}
	sort.Strings(files)
	var out []Rule
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Groups []struct {
				Name  string `yaml:"name"`
				Rules []struct {
					Record      string            `yaml:"record"`
					Alert       string            `yaml:"alert"`
					Expr        string            `yaml:"expr"`
					For         string            `yaml:"for"`
					Labels      map[string]string `yaml:"labels"`
					Annotations map[string]string `yaml:"annotations"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				out = append(out, Rule{File: f, Group: g.Name, Record: r.Record, Alert: r.Alert, Expr: r.Expr, For: r.For,
					Labels: r.Labels, Annotations: r.Annotations})
			}
		}
	}
	return out, nil
}

var (
	stringLit   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	braces      = regexp.MustCompile(`\{[^{}]*\}`)
	brackets    = regexp.MustCompile(`\[[^\[\]]*\]`)
	grouping    = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	identifier  = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	comment     = regexp.MustCompile(`#[^\n]*`)
	numberLike  = regexp.MustCompile(`\b\d[\w.]*`) // numbers, durations (5m), 1e3
	promqlWords = map[string]bool{
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true, "Inf": true, "NaN": true,
	}
)

// MetricNames are the metric names expr selects, sorted and without repeats. expr must
// be valid PromQL (promtool's to check); a selector written only as {__name__="..."}
// is not seen.
func MetricNames(expr string) []string {
	s := comment.ReplaceAllString(expr, " ")
	s = stringLit.ReplaceAllString(s, `""`)
	// Label matchers and ranges hold label names and durations, never metric names.
	for prev := ""; prev != s; {
		prev = s
		s = braces.ReplaceAllString(s, " ")
		s = brackets.ReplaceAllString(s, " ")
	}
	s = grouping.ReplaceAllString(s, " ")
	s = numberLike.ReplaceAllString(s, " ")
	seen := map[string]bool{}
	for _, loc := range identifier.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if promqlWords[name] || strings.HasPrefix(rest, "(") { // a keyword, a function or an aggregation
			continue
		}
		seen[name] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// grafanaVars are the dashboard variables, replaced by a value of the right kind so
// the expression is plain PromQL.
var grafanaVars = regexp.MustCompile(`\$\{?(__rate_interval|__interval|__range|[A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}?`)

// FromGrafana turns a dashboard query into PromQL: $__rate_interval and the other
// interval variables become 5m, any other variable (always used in a label matcher on
// these dashboards) the string it stands in.
func FromGrafana(expr string) string {
	return grafanaVars.ReplaceAllStringFunc(expr, func(v string) string {
		name := grafanaVars.FindStringSubmatch(v)[1]
		if strings.HasPrefix(name, "__") {
			return "5m"
		}
		return "value-of-" + name
	})
}

// Promtool returns the path of promtool, failing t with the way to install it when it
// is missing: the rules' and dashboards' checks never skip.
func Promtool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: it comes with Debian's prometheus package; install it with " +
			"`sudo apt-get install -y prometheus` (.ci/run installs it when missing)")
	}
	return p
}

// CheckExpressions has promtool judge exprs (by name) as PromQL: they are written as
// recording rules to a temporary rule file and checked with `promtool check rules`.
func CheckExpressions(t testing.TB, exprs map[string]string) {
	t.Helper()
	promtool := Promtool(t)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	names := make([]string, 0, len(exprs))
	for n := range exprs {
		names = append(names, n)
	}
	sort.Strings(names)
	var rules []rule
	for i, n := range names {
		rules = append(rules, rule{Record: fmt.Sprintf("checked:expr_%d", i), Expr: exprs[n]})
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "checked", "rules": rules}}}
	raw, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "exprs.yml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", "--lint=none", path).CombinedOutput()
	if err != nil {
		// promtool names the failing rule by its index; map it back to the expression's name.
		msg := string(out)
		for i, n := range names {
			msg = strings.ReplaceAll(msg, fmt.Sprintf("checked:expr_%d", i), n)
		}
		t.Fatalf("promtool check rules: %v\n%s\n(expressions by name: %v)", err, msg, names)
	}
}
