package conformance_test

import (
	"sort"
	"testing"

	"github.com/analyticsco/platform/libs/errs"
)

// TestErrorCodesAreDocumented: openapi.yaml's ErrorCode enum is exactly the codes every
// service sends (libs/httpx), and the Error body requires the code.
func TestErrorCodesAreDocumented(t *testing.T) {
	doc := loadDocument(t)
	schema := doc.Components.Schemas["ErrorCode"]
	if schema == nil || schema.Value == nil {
		t.Fatal("openapi.yaml has no ErrorCode schema")
	}
	var documented []string
	for _, v := range schema.Value.Enum {
		documented = append(documented, v.(string))
	}
	var sent []string
	for code := range errs.Codes {
		sent = append(sent, code)
	}
	sort.Strings(documented)
	sort.Strings(sent)
	if len(documented) != len(sent) {
		t.Fatalf("ErrorCode enum %v, codes sent %v", documented, sent)
	}
	for i := range sent {
		if documented[i] != sent[i] {
			t.Fatalf("ErrorCode enum %v, codes sent %v", documented, sent)
		}
	}
	errSchema := doc.Components.Schemas["Error"].Value
	required := map[string]bool{}
	for _, r := range errSchema.Required {
		required[r] = true
	}
	if !required["status"] || !required["code"] || !required["message"] {
		t.Fatalf("Error requires %v, want status, code and message", errSchema.Required)
	}
}
