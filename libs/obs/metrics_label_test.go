package obs_test

import (
	"strings"
	"testing"

	"github.com/analyticsco/platform/libs/obs"
)

func TestMethodLabelIsBounded(t *testing.T) {
	for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE"} {
		if got := obs.MethodLabel(m); got != m {
			t.Errorf("MethodLabel(%q) = %q", m, got)
		}
	}
	for _, m := range []string{"get", "PROPFIND", "", strings.Repeat("X", 2000), "GET "} {
		if got := obs.MethodLabel(m); got != "OTHER" {
			t.Errorf("MethodLabel(%q) = %q, want OTHER", m[:min(len(m), 20)], got)
		}
	}
	if obs.CodeLabel(200) != "200" || obs.CodeLabel(99) != "other" || obs.CodeLabel(1000) != "other" {
		t.Error("CodeLabel")
	}
}
