package promexpr_test

import (
	"slices"
	"testing"

	"github.com/analyticsco/platform/devstack/promexpr"
)

func TestMetricNames(t *testing.T) {
	for _, c := range []struct{ name, expr string }{
		{"a selector with matchers and a range", `rate(gateway_http_requests_total{code=~"5..",route!="x{y}"}[5m])`},
		{"grouping clauses name labels, not metrics", `sum by (job, route) (rate(a_total[5m])) / on (job) group_left (route) b`},
		{"aggregation with the clause after", `sum(rate(a_total[1h])) without (instance) > 14.4 * 0.001`},
		{"keywords and numbers", `a_total > 0 and on () (b == 0) or vector(1) unless c offset 5m`},
		{"histogram_quantile over a recorded series", `histogram_quantile(0.99, job_le:http_request_duration_seconds_bucket:rate5m)`},
		{"absent of a comparison", `absent(up{job="dbtsync-worker"} == 1)`},
		{"strings with parentheses and braces", `label_replace(a_total, "dst", "$1)", "src", "({x})")`},
	} {
		got := promexpr.MetricNames(c.expr)
		want := map[string][]string{
			"a selector with matchers and a range":      {"gateway_http_requests_total"},
			"grouping clauses name labels, not metrics": {"a_total", "b"},
			"aggregation with the clause after":         {"a_total"},
			"keywords and numbers":                      {"a_total", "b", "c"},
			"histogram_quantile over a recorded series": {"job_le:http_request_duration_seconds_bucket:rate5m"},
			"absent of a comparison":                    {"up"},
			"strings with parentheses and braces":       {"a_total"},
		}[c.name]
		if !slices.Equal(got, want) {
			t.Errorf("%s: MetricNames(%s) = %v, want %v", c.name, c.expr, got, want)
		}
	}
}

func TestFromGrafana(t *testing.T) {
	got := promexpr.FromGrafana(`rate(a_total{job="$job",route=~"${route:regex}"}[$__rate_interval])`)
	if want := `rate(a_total{job="value-of-job",route=~"value-of-route"}[5m])`; got != want {
		t.Errorf("FromGrafana = %s, want %s", got, want)
	}
}
