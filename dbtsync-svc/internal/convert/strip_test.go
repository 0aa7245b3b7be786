package convert

import (
	"regexp"
	"testing"
)

// stripParams replaces a regular expression run on every typed column (its cost showed
// in profiles): it must give what the expression gave.
func FuzzStripParamsIsTheRegexpItReplaced(f *testing.F) {
	re := regexp.MustCompile(`\([^()]*\)`)
	for _, s := range []string{"numeric(18,2)", "a(b(c)d)", "((x))", "x()", "(", ")(", "timestamp(6) with time zone", "a(b)c(d)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := stripParams(s), re.ReplaceAllString(s, " "); got != want {
			t.Fatalf("%q: %q, want %q", s, got, want)
		}
	})
}
