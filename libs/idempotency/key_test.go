package idempotency_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/idempotency"
)

func TestParseKey(t *testing.T) {
	long := strings.Repeat("k", 255)
	cases := []struct {
		name, in, want string
		bad            bool
	}{
		{name: "a bare token", in: "8e03978e-40d5-43e8-bc93-6894a57f9324", want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "a structured-field string", in: `"8e03978e-40d5"`, want: "8e03978e-40d5"},
		{name: "a quoted key with escapes", in: `"a\"b\\c"`, want: `a"b\c`},
		{name: "spaces around the value", in: "  abc ", want: "abc"},
		{name: "255 characters", in: long, want: long},
		{name: "255 characters quoted", in: `"` + long + `"`, want: long},
		{name: "256 characters", in: long + "k", bad: true},
		{name: "256 characters quoted", in: `"` + long + `k"`, bad: true},
		{name: "empty", in: "", bad: true},
		{name: "empty quoted", in: `""`, bad: true},
		{name: "a control character", in: "ab\x01c", bad: true},
		{name: "a space inside", in: "ab c", bad: true},
		{name: "a space inside quotes", in: `"ab c"`, bad: true},
		{name: "non-ASCII", in: "clé", bad: true},
		{name: "DEL", in: "ab\x7f", bad: true},
		{name: "an unclosed quote", in: `"abc`, bad: true},
		{name: "text after the closing quote", in: `"abc"d`, bad: true},
		{name: "a bad escape", in: `"a\nb"`, bad: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := idempotency.ParseKey(c.in)
			if c.bad {
				if !errors.Is(err, idempotency.ErrInvalidKey) {
					t.Fatalf("ParseKey(%q) = %q, %v; want ErrInvalidKey", c.in, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
		})
	}
}

// FuzzParseKey: every key accepted is 1-255 visible ASCII characters, and a bare key
// and its quoted form are read as the same key.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, "", `"`, strings.Repeat("x", 256), "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, err := idempotency.ParseKey(in)
		if err != nil {
			if !errors.Is(err, idempotency.ErrInvalidKey) {
				t.Fatalf("ParseKey(%q): %v is not ErrInvalidKey", in, err)
			}
			return
		}
		if len(key) < 1 || len(key) > idempotency.MaxKeyLength {
			t.Fatalf("ParseKey(%q) = %q: %d characters", in, key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x21 || key[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q: byte %#x", in, key, key[i])
			}
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := idempotency.ParseKey(quoted); err != nil || again != key {
			t.Fatalf("the quoted form %q of %q reads %q, %v", quoted, key, again, err)
		}
	})
}
