package convert

import "testing"

// ParseRef's shortcut for ref('name') gives what the regular expression gives.
func FuzzParseRefShortcutIsTheRegexp(f *testing.F) {
	for _, s := range []string{"ref('a')", "ref('a', v=2)", "ref('p', 'a')", "ref('')", "ref('a'b')", "ref('a\")", "x ref('a')", "ref('a') ", "ref(\"a\")"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := Ref{}
		if m := refRE.FindStringSubmatch(s); m != nil {
			want = Ref{Name: m[1], Version: normVersion(m[3])}
			if m[2] != "" {
				want.Name = m[2]
			}
		}
		if got := ParseRef(s); got != want {
			t.Fatalf("%q: %+v, want %+v", s, got, want)
		}
	})
}
