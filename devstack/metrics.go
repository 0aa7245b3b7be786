package devstack

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricValue is one series of reg as Prometheus would scrape it: name with exactly
// these label values, in the order of its label names; 0 when there is none. It reads
// counters and gauges.
func MetricValue(t testing.TB, reg prometheus.Gatherer, name string, labelValues ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labelValues) {
				continue
			}
			for i, l := range m.GetLabel() {
				if l.GetValue() != labelValues[i] {
					continue metrics
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}
