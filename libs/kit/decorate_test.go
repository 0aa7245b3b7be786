package kit_test

import (
	"slices"
	"testing"

	"github.com/analyticsco/platform/libs/kit"
)

type service interface{ Calls() []string }

type base struct{}

func (base) Calls() []string { return []string{"service"} }

type layer struct {
	service
	name string
}

func (l layer) Calls() []string { return append([]string{l.name}, l.service.Calls()...) }

func wrap(name string) func(service) service {
	return func(next service) service { return layer{next, name} }
}

// TestDecorateWrapsAuditThenLogThenMetrics: the outermost decorator is Metrics, the
// innermost Audit, and a nil one is left out.
func TestDecorateWrapsAuditThenLogThenMetrics(t *testing.T) {
	for _, c := range []struct {
		name string
		d    kit.Decorators[service]
		want []string
	}{
		{"all three", kit.Decorators[service]{Audit: wrap("audit"), Log: wrap("log"), Metrics: wrap("metrics")}, []string{"metrics", "log", "audit", "service"}},
		{"no audit", kit.Decorators[service]{Log: wrap("log"), Metrics: wrap("metrics")}, []string{"metrics", "log", "service"}},
		{"none", kit.Decorators[service]{}, []string{"service"}},
	} {
		if got := kit.Decorate[service](base{}, c.d).Calls(); !slices.Equal(got, c.want) {
			t.Errorf("%s: calls %v, want %v", c.name, got, c.want)
		}
	}
}
