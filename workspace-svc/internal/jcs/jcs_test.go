package jcs_test

import (
	"errors"
	"math"
	"testing"

	"github.com/analyticsco/platform/workspace-svc/internal/jcs"
)

// TestNumbersAreWrittenAsECMAScriptWritesThem: the number cases of RFC 8785 Appendix B.
func TestNumbersAreWrittenAsECMAScriptWritesThem(t *testing.T) {
	for _, c := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		if got := jcs.Number(math.Float64frombits(c.bits)); got != c.want {
			t.Errorf("%#016x: got %s, want %s", c.bits, got, c.want)
		}
	}
}

// TestTransformSortsEscapesAndDropsWhitespace: the RFC's sample object, and member names
// ordered by UTF-16 code units (a name beyond the BMP sorts before U+FB33).
func TestTransformSortsEscapesAndDropsWhitespace(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"rfc-3.2.2", `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{"utf16-order", `{"\ufb33":1,"\ud83d\ude00":2,"a":3,"\u00e9":4}`, "{\"a\":3,\"\u00e9\":4,\"\U0001F600\":2,\"\ufb33\":1}"},
		{"no-html-escaping", `{"a":"<&>\u2028"}`, "{\"a\":\"<&>\u2028\"}"},
	} {
		got, err := jcs.Transform([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("%s: got %s (%v), want %s", c.name, got, err, c.want)
		}
	}
}

func TestWhatHasNoCanonicalFormIsRefused(t *testing.T) {
	for _, in := range []string{`{"a":1e400}`, `{"a":1} {}`, `{"a":`, "\"\xff\""} {
		if _, err := jcs.Transform([]byte(in)); !errors.Is(err, jcs.ErrNotCanonicalizable) {
			t.Errorf("%q: %v, want ErrNotCanonicalizable", in, err)
		}
	}
}
