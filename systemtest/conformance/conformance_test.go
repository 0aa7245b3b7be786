package conformance_test

import (
	"context"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/analyticsco/platform/api"
)

func loadDocument(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.YAML)
	if err != nil {
		t.Fatalf("openapi.yaml does not load: %v", err)
	}
	return doc
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadDocument(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	if doc.OpenAPI != "3.0.3" || doc.Info.Version != "1.0.0" {
		t.Errorf("openapi %q, info.version %q; want 3.0.3 and the contract's version 1.0.0", doc.OpenAPI, doc.Info.Version)
	}
	// Every operation has an id and says what its failures look like.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" {
				t.Errorf("%s %s has no operationId", method, path)
			}
			if op.Responses == nil || op.Responses.Len() == 0 {
				t.Errorf("%s %s documents no response", method, path)
			}
		}
	}
}
