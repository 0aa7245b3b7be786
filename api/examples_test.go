package api_test

import (
	"fmt"
	"regexp"
	"testing"
)

// settingName is the shape of the platform's environment variables: an operator's
// names, which the contract's descriptions may cite but a client never reads in a body.
var settingName = regexp.MustCompile(`\b(DBT_SYNC|DBT|EMBED|GATEWAY|WORKSPACE|AUTH|AUDIT|RATE_LIMIT|REDIS|MONGODB|NATS|IDENTITY|UPSTREAM|OTEL)_[A-Z0-9_]+\b`)

// examples calls f with every string inside an example (example: or examples:) of doc,
// and the path to it.
func examples(path string, v any, inExample bool, f func(path, s string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			examples(path+"."+k, e, inExample || k == "example" || k == "examples", f)
		}
	case []any:
		for i, e := range v {
			examples(fmt.Sprintf("%s[%d]", path, i), e, inExample, f)
		}
	case string:
		if inExample {
			f(path, v)
		}
	}
}

// TestExampleBodiesNameNoSetting: an example is what a client is answered, and an answer
// names a limit and its value, never the operator's environment variable behind it.
func TestExampleBodiesNameNoSetting(t *testing.T) {
	n := 0
	examples("", document(t), false, func(path, s string) {
		n++
		if m := settingName.FindString(s); m != "" {
			t.Errorf("%s names %s: %q", path, m, s)
		}
	})
	if n < 20 {
		t.Fatalf("only %d example strings found", n)
	}
}

func TestASettingInAnExampleIsFound(t *testing.T) {
	doc := map[string]any{"responses": map[string]any{"JobLimit": map[string]any{"example": map[string]any{
		"message": "the most it may have (DBT_SYNC_MAX_QUEUED_JOBS)"}}, "description": "past `DBT_SYNC_MAX_QUEUED_JOBS`"}}
	var found []string
	examples("", doc, false, func(path, s string) {
		if settingName.MatchString(s) {
			found = append(found, path)
		}
	})
	if len(found) != 1 || found[0] != ".responses.JobLimit.example.message" {
		t.Fatalf("found %v, want the example's message only", found)
	}
}
