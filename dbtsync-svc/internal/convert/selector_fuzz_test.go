package convert_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/analyticsco/platform/dbtsync-svc/internal/convert"
)

// Any select and exclude either fail to parse with a *SelectorError or apply to a
// manifest without panicking, within their step budget, keeping a subset of its models
// whose counts add up; and a selector that excludes what it selects keeps nothing.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"customers", "+orders", "2+stg_orders+1", "@a", "tag:x,path:models/*", "package:this",
		"a.b.*", "[!a]*", "[", "models/**/x.sql", "x.sql", "config.x:y", "@+a+", "+", ",", " a  b ", "1234567890+a", "a+99999999999"} {
		f.Add(s, "")
		f.Add(s, s)
	}
	nodes := map[string]any{
		"model.p.a":      graphNode("model", "a", []string{"p", "a"}),
		"model.p.b":      graphNode("model", "b", []string{"p", "dir", "b"}, "model.p.a", "seed.p.s"),
		"model.p.c.v1":   graphNode("model", "c", []string{"p", "c", "v1"}, "model.p.b", "model.p.c.v1"),
		"seed.p.s":       graphNode("seed", "s", []string{"p", "s"}),
		"snapshot.p.snp": graphNode("snapshot", "snp", []string{"p", "snp"}, "model.p.c.v1", "model.p.a"),
	}
	nodes["model.p.c.v1"].(map[string]any)["version"] = 1
	nodes["model.p.b"].(map[string]any)["tags"] = []string{"x", "y.z"}
	base := manifestOf(f, nodes)
	f.Fuzz(func(t *testing.T, sel, excl string) {
		s, err := convert.ParseSelector(sel, excl, convert.SelectorLimits{MaxSteps: 1000})
		if err != nil {
			var se *convert.SelectorError
			if !errors.As(err, &se) || (se.Field != "select" && se.Field != "exclude") {
				t.Fatalf("ParseSelector(%q, %q): %v is no *SelectorError", sel, excl, err)
			}
			return
		}
		p := *base // Apply changes only which models the project holds
		p.Models = slices.Clone(base.Models)
		total := len(p.Models)
		res, err := s.Apply(&p)
		if err != nil {
			t.Fatalf("Apply(%q, %q): %v", sel, excl, err)
		}
		if res.ModelsKept+res.ModelsDropped != total || res.ModelsKept != len(p.Models) || len(res.Kept) != res.ModelsKept {
			t.Fatalf("Apply(%q, %q) = %+v over %d models", sel, excl, res, total)
		}
		if strings.TrimSpace(sel) != "" && sel == excl && res.ModelsKept != 0 {
			t.Fatalf("select and exclude %q kept %v", sel, res.Kept)
		}
	})
}
