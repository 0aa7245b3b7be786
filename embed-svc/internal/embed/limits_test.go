package embed

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestLimitsCheck(t *testing.T) {
	l := DefaultLimits
	deep := json.RawMessage(`{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`)
	var e *Error
	if err := l.check(&GenerateSessionRequest{SecurityContext: deep}); !errors.As(err, &e) || e.Kind != KindInvalid || !strings.Contains(e.Message, "EMBED_MAX_SECURITY_CONTEXT_DEPTH") {
		t.Fatalf("41 levels: %v", err)
	}
	brackets := json.RawMessage(`{"s":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"[[[["}`)
	if err := l.check(&GenerateSessionRequest{SecurityContext: brackets}); err != nil {
		t.Fatalf("brackets inside a string are not nesting: %v", err)
	}
	big := json.RawMessage(`{"s":"` + strings.Repeat("x", 17<<10) + `"}`)
	if err := l.check(&GenerateSessionRequest{SecurityContext: big}); !errors.As(err, &e) || e.Kind != KindTooLarge {
		t.Fatalf("17 KiB: %v", err)
	}
	if err := l.check(&GenerateSessionRequest{Groups: make([]string, 1001)}); !errors.As(err, &e) || !strings.Contains(e.Message, "groups") {
		t.Fatalf("1001 groups: %v", err)
	}
}
