package redisx_test

import (
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/redisx"
)

func TestCommandLabelIsBounded(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"exists", "exists"}, {"EXISTS", "exists"}, {"evalsha", "evalsha"},
		{"frobnicate", "other"}, {"", "other"}, {strings.Repeat("x", 1000), "other"},
	} {
		if got := redisx.CommandLabel(c.name); got != c.want {
			t.Errorf("CommandLabel(%.20q) = %q, want %q", c.name, got, c.want)
		}
	}
}
