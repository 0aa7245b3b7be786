package embed_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/analyticsco/platform/embed-svc/internal/embed"
	"github.com/analyticsco/platform/libs/errs"
)

func TestLimitsCheck(t *testing.T) {
	l := embed.DefaultLimits
	deep := json.RawMessage(`{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`)
	if e, ok := errs.As(l.Check(&embed.GenerateSessionRequest{SecurityContext: deep})); !ok || e.Kind != errs.Invalid || !strings.Contains(e.Message, "nests 41 levels deep, over the limit of") || strings.Contains(e.Message, "EMBED_") {
		t.Fatalf("41 levels: %v", e)
	}
	brackets := json.RawMessage(`{"s":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"[[[["}`)
	if err := l.Check(&embed.GenerateSessionRequest{SecurityContext: brackets}); err != nil {
		t.Fatalf("brackets inside a string are not nesting: %v", err)
	}
	big := json.RawMessage(`{"s":"` + strings.Repeat("x", 17<<10) + `"}`)
	if e, ok := errs.As(l.Check(&embed.GenerateSessionRequest{SecurityContext: big})); !ok || e.Kind != errs.TooLarge {
		t.Fatalf("17 KiB: %v", e)
	}
	if e, ok := errs.As(l.Check(&embed.GenerateSessionRequest{Groups: make([]string, 1001)})); !ok || !strings.Contains(e.Message, "groups") {
		t.Fatalf("1001 groups: %v", e)
	}
}
